package turnctlcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"ckptfs/internal/turnctlcli/agenthooks"
	"ckptfs/turnctl"
)

var hookEventCmd = &command{
	name:  "hook-event",
	args:  "AGENT [ARG...]",
	short: "mark a turn boundary from an agent's hook (its JSON on stdin)",
	long: `The one command the hooks of "turnctl hooks install" run. AGENT is one of
claude-code, codex, gemini, aider. It reads the agent's hook input (JSON) on
standard input, or, for Codex's notify program, from its last argument, and:

  prompt submitted     begin with the whole prompt (the label is its first
  (UserPromptSubmit,   line; turnctl show prints it all), ref = the agent's
  BeforeAgent)         prompt id (Codex: turn_id; otherwise the session id
                       and a digest of the prompt)
  answer finished      end: ref = the agent's id of its answer (Claude Code:
  (Stop, AfterAgent,   the last assistant message's uuid, read from the tail
  notify, aider)       of transcript_path; Codex: turn_id)
  anything else        nothing

A prompt with the word #pin in it (e.g. "#pin migrate the schema") also pins
its turn (turnctl pin): retention and forget then keep it whatever the
policy, until turnctl unpin.

The same prompt event delivered twice leaves the turn it opened alone; a
second prompt without an end closes the first turn (begin does); an end
with no turn open does nothing. The project is the mount that contains the
agent's cwd (from the payload), else -C DIR or the current directory.

hook-event never fails the agent's turn: it always exits 0 and prints
nothing on standard output (Gemini CLI: "{}"). When the project is not
mounted or anything goes wrong it prints one line on standard error.
--json has no effect.`,
	self:       true,
	neverFails: true,
	opts:       func() options { return &hookEventOptions{} },
}

type hookEventOptions struct {
	verbose bool
}

func (o *hookEventOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "say on stderr what was done, also when all went well")
}

// hookTimeout bounds the whole of hook-event's talk with the daemon.
const hookTimeout = 5 * time.Second

// maxHookInput bounds what hook-event reads from standard input.
const maxHookInput = 16 << 20

func (o *hookEventOptions) run(e *env, args []string) (err error) {
	var ev agenthooks.Event
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("BUG: %v", r)
		}
		if ev.WantsJSON {
			fmt.Fprintln(e.stdout, "{}")
		}
		if err != nil {
			fmt.Fprintf(e.stderr, "turnctl hook-event: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		err = nil
	}()
	if len(args) == 0 {
		return fmt.Errorf("missing AGENT (one of %s); nothing recorded", agenthooks.Names())
	}
	agent, err := agenthooks.Lookup(args[0])
	if err != nil {
		return fmt.Errorf("%v; nothing recorded", err)
	}
	ev.WantsJSON = agent.Name == "gemini"
	var input []byte
	if agent.Name != "aider" && !hasJSONArg(args[1:]) && !isTerminal(e.stdin) {
		// Aider runs its notifications command with its own terminal as
		// standard input: reading it would steal the user's keystrokes.
		input, err = io.ReadAll(io.LimitReader(e.stdin, maxHookInput))
		if err != nil {
			return fmt.Errorf("reading the hook input: %v; nothing recorded", err)
		}
	}
	ev, err = agenthooks.Parse(agent, input, args[1:])
	if err != nil {
		return fmt.Errorf("%s: %v; nothing recorded", agent.Title, err)
	}
	if ev.Action == agenthooks.Ignore {
		if o.verbose {
			fmt.Fprintf(e.stderr, "turnctl: %s event %q marks no turn boundary\n", agent.Title, ev.Name)
		}
		return nil
	}
	h := e.h // tests set it
	if h == nil {
		var closer func()
		h, closer, err = connectForHook(e, ev)
		if err != nil {
			return err
		}
		defer closer()
	}
	ctx, cancel := context.WithTimeout(e.ctx, hookTimeout)
	defer cancel()
	what, err := applyEvent(ctx, h, ev)
	if err != nil {
		return fmt.Errorf("%s (%s): %v", ev.Action, ev.Name, err)
	}
	if o.verbose {
		fmt.Fprintf(e.stderr, "turnctl: %s\n", what)
	}
	return nil
}

// connectForHook reaches the daemon of the mount containing the agent's
// cwd (-C DIR first, the current directory last).
func connectForHook(e *env, ev agenthooks.Event) (turnctl.Handler, func(), error) {
	g := globals{dir: e.g.dir}
	if g.dir == "" {
		g.dir = ev.Cwd
	}
	p, err := findProject(g, true)
	if errors.Is(err, errNotMounted) {
		where := g.dir
		if where == "" {
			where, _ = os.Getwd()
		}
		return nil, nil, fmt.Errorf("%s is not inside a ckptfs mount; %s not recorded", where, ev.Action)
	} else if err != nil {
		return nil, nil, fmt.Errorf("%v; %s not recorded", err, ev.Action)
	}
	h, closer, err := p.connect(e.offline)
	if err != nil {
		return nil, nil, fmt.Errorf("%v; %s not recorded", err, ev.Action)
	}
	return h, closer, nil
}

// applyEvent carries out ev and says what it did. Repeated and
// out-of-order events are not errors:
//
//   - a prompt whose ref already names the open turn was seen before: no-op;
//   - a prompt whose ref names an older turn (the same text sent again):
//     the ref gets a suffix;
//   - an end with no turn open: no-op;
//   - an end whose ref names another turn: the turn is closed without it;
//   - a step with no turn open, or after a tool that changed nothing:
//     no-op.
func applyEvent(ctx context.Context, h turnctl.Handler, ev agenthooks.Event) (string, error) {
	switch ev.Action {
	case agenthooks.Begin:
		req := turnctl.BeginRequest{Label: ev.Prompt, Ref: ev.Ref}
		rep, err := h.Begin(ctx, req)
		if isConflict(err) && ev.Ref != "" {
			st, serr := h.Status(ctx, turnctl.StatusRequest{})
			if serr == nil && st.Open && st.Turn != nil && slices.Contains(st.Turn.Refs, ev.Ref) {
				return fmt.Sprintf("turn %d is already open for this prompt (%s)", st.Turn.Num, ev.Name), nil
			}
			req.Ref = ev.Ref + "." + strconv.FormatInt(time.Now().UnixMilli(), 36)
			rep, err = h.Begin(ctx, req)
		}
		if err != nil {
			return "", err
		}
		if !asksPin(ev.Prompt) {
			return fmt.Sprintf("turn %d opened (%s, ref %s)", rep.Turn.Num, ev.Name, req.Ref), nil
		}
		if _, err := h.Pin(ctx, turnctl.PinRequest{Turn: strconv.FormatUint(rep.Turn.Num, 10), Note: pinNote}); err != nil {
			return "", fmt.Errorf("turn %d opened, but not pinned: %w", rep.Turn.Num, err)
		}
		return fmt.Sprintf("turn %d opened and pinned (%s, ref %s)", rep.Turn.Num, ev.Name, req.Ref), nil
	case agenthooks.End:
		rep, err := h.End(ctx, turnctl.EndRequest{Ref: ev.Ref})
		if isConflict(err) {
			st, serr := h.Status(ctx, turnctl.StatusRequest{})
			if serr == nil && !st.Open {
				return fmt.Sprintf("no turn is open: nothing to close (%s)", ev.Name), nil
			}
			if ev.Ref != "" {
				rep, err = h.End(ctx, turnctl.EndRequest{})
			}
		}
		if err != nil {
			return "", err
		}
		return rep.Summary, nil
	case agenthooks.Step:
		rep, err := h.Step(ctx, turnctl.StepRequest{Tool: ev.Tool, Label: ev.ToolLabel})
		if isConflict(err) {
			return fmt.Sprintf("no turn is open: no step to end (%s)", ev.Name), nil
		}
		if err != nil {
			return "", err
		}
		if rep.Step == nil {
			return fmt.Sprintf("%s changed nothing: no step (%s)", ev.Tool, ev.Name), nil
		}
		return fmt.Sprintf("step %d.%d ended (%s, %s)", rep.Step.Turn, rep.Step.Num, ev.Tool, ev.Name), nil
	}
	return "nothing to do", nil
}

// pinNote is the note of a pin a prompt asked for.
const pinNote = "pinned by its prompt (#pin)"

// asksPin reports whether a prompt asks for its turn to be pinned: it has
// the word #pin (any case) on its own, e.g. "#pin refactor the parser".
func asksPin(prompt string) bool {
	for _, w := range strings.Fields(prompt) {
		if strings.EqualFold(w, "#pin") {
			return true
		}
	}
	return false
}

func isConflict(err error) bool {
	var te *turnctl.Error
	return errors.As(err, &te) && te.Code == turnctl.CodeConflict
}

func hasJSONArg(args []string) bool {
	return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(strings.TrimSpace(a), "{") })
}

func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
