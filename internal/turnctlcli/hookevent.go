package turnctlcli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
  tool call finished   step: tool = tool_name, label = the file or command
  (PostToolUse,        it worked on
  AfterTool)
  anything else        nothing

A prompt with the word #pin in it (e.g. "#pin migrate the schema") also pins
its turn (turnctl pin): retention and forget then keep it whatever the
policy, until turnctl unpin.

The same prompt event delivered twice leaves the turn it opened alone; a
second prompt without an end closes the first turn (begin does); an end
with no turn open does nothing. An end closes only its own session's turn:
one whose opening ref names the payload's session_id (Codex: its turn_id).
While another session's turn or a manual turn (a person's edits) is open,
it changes nothing and says so on standard error. Aider and Codex's
notify, which name no session, close whatever turn is open. A step, too,
ends only a step of its session's turn; in another's it ends none, quietly
(the tool's changes stay in the open turn, in its current step).

The project is the mount that contains -C DIR, if given; else the first of:
the agent's cwd (from the payload); $CLAUDE_PROJECT_DIR (Claude Code) or
$GEMINI_PROJECT_DIR (Gemini CLI); the current directory. An end (and a step) goes
on down that list to the mount whose open turn is its session's, so a session
that cd'ed out of the project (/tmp, an --add-dir directory) still closes
its turn.

The input is read as a stream, so its size matters little: a prompt over
128 KiB is cut (and says so at its end), other long strings (a tool's
whole output) are skipped. Only an input over 256 MiB, or over 16 MiB
with its long strings cut, is refused, and the message says which.

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

func (o *hookEventOptions) run(e *env, args []string) (err error) {
	wantsJSON := false
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("BUG: %v", r)
		}
		if wantsJSON {
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
	// Gemini CLI reads the hook's standard output as JSON whatever
	// happens: {} also when the input is malformed.
	wantsJSON = agent.Name == "gemini"
	var in shrunkJSON
	if agent.Name != "aider" && !hasJSONArg(args[1:]) && !isTerminal(e.stdin) {
		// Aider runs its notifications command with its own terminal as
		// standard input: reading it would steal the user's keystrokes.
		in, err = shrinkJSON(e.stdin, maxHookString, maxShrunkInput, maxHookInput)
		if errors.Is(err, errHookInputTooLarge) {
			return fmt.Errorf("%s: %v; nothing recorded", agent.Title, err)
		} else if err != nil {
			return fmt.Errorf("reading the hook input: %v; nothing recorded", err)
		}
	}
	ev, err := agenthooks.Parse(agent, in.data, args[1:])
	if err != nil {
		return fmt.Errorf("%s: %v; nothing recorded", agent.Title, err)
	}
	if total, ok := in.cut["prompt"]; ok && ev.Action == agenthooks.Begin {
		ev.Prompt = fixCutNote(ev.Prompt, total)
	}
	if ev.Action == agenthooks.Ignore {
		if o.verbose {
			fmt.Fprintf(e.stderr, "turnctl: %s event %q marks no turn boundary\n", agent.Title, ev.Name)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(e.ctx, hookTimeout)
	defer cancel()
	var what string
	if e.h != nil { // tests set it
		what, err = applyEvent(ctx, e.h, ev)
	} else {
		what, err = applyInMounts(ctx, e, agent, ev)
	}
	var nm *hookNotMountedError
	if errors.As(err, &nm) {
		return err
	}
	if errors.Is(err, errNotOurs) {
		err = nil // a step of another session's turn: none, quietly
	}
	if err != nil {
		return fmt.Errorf("%s (%s): %v", ev.Action, ev.Name, err)
	}
	if o.verbose {
		fmt.Fprintf(e.stderr, "turnctl: %s\n", what)
	}
	return nil
}

// hookDir is a directory a hook's project may be found from, and what
// named it.
type hookDir struct {
	dir, from string // dir "": the current directory
}

// hookDirs lists, in order, where hook-event looks for the project: -C
// DIR alone, if given; else the agent's cwd from the payload; the
// agent's project directory from the environment it gives its hooks
// ($CLAUDE_PROJECT_DIR for Claude Code, $GEMINI_PROJECT_DIR for Gemini
// CLI); the current directory (or $CKPTFS_DIR). A session that cd'ed out of the project
// (into an --add-dir directory, /tmp) still reaches its mount.
func hookDirs(e *env, agent *agenthooks.Agent, ev agenthooks.Event) []hookDir {
	var ds []hookDir
	add := func(dir, from string) {
		if dir == "" {
			return
		}
		for _, d := range ds {
			if filepath.Clean(d.dir) == filepath.Clean(dir) {
				return
			}
		}
		ds = append(ds, hookDir{dir, from})
	}
	if e.g.dir != "" {
		// Named on the command line: that project or none, as for
		// every other command.
		return []hookDir{{e.g.dir, "-C"}}
	}
	add(ev.Cwd, "the payload's cwd")
	if v := projectDirEnv[agent.Name]; v != "" {
		add(os.Getenv(v), "$"+v)
	}
	return append(ds, hookDir{"", "the current directory"})
}

// projectDirEnv names the environment variable an agent sets for its
// hooks to the project's root.
var projectDirEnv = map[string]string{
	"claude-code": "CLAUDE_PROJECT_DIR",
	"gemini":      "GEMINI_PROJECT_DIR",
}

// hookNotMountedError: none of the hook's directories is inside a mount.
type hookNotMountedError struct{ msg string }

func (e *hookNotMountedError) Error() string { return e.msg }

// applyInMounts carries out ev in the mount of the first of hookDirs
// inside one. An end that must close its session's turn (ev.Session) and
// finds another turn open there, or none, goes on to the next mount: the
// one whose open turn is this session's records it.
func applyInMounts(ctx context.Context, e *env, agent *agenthooks.Agent, ev agenthooks.Event) (string, error) {
	var problems []string
	var firstWhat string
	var firstErr error
	tried := false
	seen := map[string]bool{} // directories tried, and projects
	said := map[string]bool{} // problems told
	for _, d := range hookDirs(e, agent, ev) {
		p, err := findProject(globals{dir: d.dir}, true)
		if err != nil {
			where := d.dir
			if where == "" {
				where, _ = os.Getwd()
			}
			if seen[where] {
				continue // the current directory, the payload's cwd too
			}
			seen[where] = true
			if errors.Is(err, errNotMounted) {
				problems = append(problems, fmt.Sprintf("%s (%s) is not inside a ckptfs mount", where, d.from))
			} else if !said[err.Error()] { // one dead mount, met from two places
				said[err.Error()] = true
				problems = append(problems, fmt.Sprintf("%v (%s)", err, d.from))
			}
			continue
		}
		if seen[p.root] {
			continue
		}
		seen[p.root] = true
		h, closer, err := p.connect(e.offline)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		what, err := applyEvent(ctx, h, ev)
		closer()
		var lo *leftOpenError
		if ev.Action == agenthooks.End && ev.Session != "" && (errors.As(err, &lo) || what == noTurnToClose(ev)) ||
			ev.Action == agenthooks.Step && ev.Session != "" && (errors.Is(err, errNotOurs) || what == noStep(ev)) {
			if !tried {
				firstWhat, firstErr = what, err
			}
			tried = true
			continue
		}
		return what, err
	}
	if tried {
		return firstWhat, firstErr
	}
	return "", &hookNotMountedError{fmt.Sprintf("%s; %s not recorded", strings.Join(problems, "; "), ev.Action)}
}

// applyEvent carries out ev and says what it did. Repeated and
// out-of-order events are not errors:
//
//   - a prompt whose ref already names the open turn was seen before: no-op;
//   - a prompt whose ref names an older turn (the same text sent again):
//     the ref gets a suffix;
//   - an end with no turn open: no-op;
//   - an end of a session (ev.Session) while a turn not opened for it is
//     open (another session's, a manual turn): no-op, and an error
//     (leftOpenError) that says so;
//   - an end whose ref names another turn: the turn is closed without it;
//   - a step with no turn open, or after a tool that changed nothing:
//     no-op;
//   - a step of a session (ev.Session) while a turn not opened for it is
//     open: no-op, and errNotOurs (quiet; applyInMounts tries the next
//     mount first).
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
		req := turnctl.EndRequest{Ref: ev.Ref, IfOpenedBy: ev.Session}
		rep, err := endIf(ctx, h, req)
		if isConflict(err) {
			st, serr := h.Status(ctx, turnctl.StatusRequest{Brief: true})
			if serr == nil && !st.Open {
				return noTurnToClose(ev), nil
			}
			if serr == nil && st.Turn != nil && ev.Session != "" && !turnctl.OpenedBy(*st.Turn, ev.Session) {
				return "", &leftOpenError{turnctl.NotOpenedBy(*st.Turn, ev.Session)}
			}
			if ev.Ref != "" {
				// The ref names an earlier turn: close without it.
				req.Ref = ""
				rep, err = endIf(ctx, h, req)
			}
		}
		if err != nil {
			return "", err
		}
		return rep.Summary, nil
	case agenthooks.Step:
		rep, err := stepIf(ctx, h, turnctl.StepRequest{Tool: ev.Tool, Label: ev.ToolLabel, IfOpenedBy: ev.Session})
		if isConflict(err) {
			st, serr := h.Status(ctx, turnctl.StatusRequest{Brief: true})
			if serr == nil && !st.Open {
				return noStep(ev), nil
			}
			// Another session's turn, a manual one: the tool's changes
			// stay in it (its own next step holds them). Not an error.
			return fmt.Sprintf("%s (%s)", errMessage(err), ev.Name), errNotOurs
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

// noStep says that a step event found no turn open.
func noStep(ev agenthooks.Event) string {
	return fmt.Sprintf("no turn is open: no step to end (%s)", ev.Name)
}

// errNotOurs: a step event found a turn open that is not its session's;
// applyInMounts tries the next mount, and then it is no error.
var errNotOurs = errors.New("the open turn is not this session's")

// noTurnToClose says that an end found no turn open.
func noTurnToClose(ev agenthooks.Event) string {
	return fmt.Sprintf("no turn is open: nothing to close (%s)", ev.Name)
}

// leftOpenError: an end left the open turn alone, it is not its
// session's.
type leftOpenError struct{ why string }

func (e *leftOpenError) Error() string { return e.why + "; left open" }

// endIf is h.End. A daemon older than IfOpenedBy rejects it as an unknown
// field: then the open turn is checked first (not atomically, as before).
func endIf(ctx context.Context, h turnctl.Handler, req turnctl.EndRequest) (*turnctl.EndReply, error) {
	rep, err := h.End(ctx, req)
	var te *turnctl.Error
	if req.IfOpenedBy == "" || !errors.As(err, &te) || te.Code != turnctl.CodeBadRequest || !strings.Contains(te.Message, "if_opened_by") {
		return rep, err
	}
	if err := checkOpenTurn(ctx, h, req.IfOpenedBy, 0, ""); err != nil {
		return nil, err
	}
	req.IfOpenedBy = ""
	return h.End(ctx, req)
}

// checkOpenTurn is, for a daemon too old to check it atomically, the
// check it would make before an end or a step: that a turn is open, that
// it is turn n (if not 0), and that it was opened for key (if not "");
// suffix ends the message of a refusal.
func checkOpenTurn(ctx context.Context, h turnctl.Handler, key string, n uint64, suffix string) error {
	st, err := h.Status(ctx, turnctl.StatusRequest{Brief: true})
	if err != nil {
		return err
	}
	if !st.Open || st.Turn == nil {
		return &turnctl.Error{Code: turnctl.CodeConflict, Message: "no turn is open"}
	}
	if n != 0 && st.Turn.Num != n {
		return &turnctl.Error{Code: turnctl.CodeConflict, Message: fmt.Sprintf("turn %d was closed; the open turn is %d%s", n, st.Turn.Num, suffix)}
	}
	if key != "" && !turnctl.OpenedBy(*st.Turn, key) {
		return &turnctl.Error{Code: turnctl.CodeConflict, Message: turnctl.NotOpenedBy(*st.Turn, key) + suffix}
	}
	return nil
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

// errMessage is the daemon's message of err, without a code.
func errMessage(err error) string {
	var te *turnctl.Error
	if errors.As(err, &te) {
		return te.Message
	}
	return err.Error()
}

// isUnknownField reports whether err is a daemon's refusal of a request
// field it is too old to know (json name field).
func isUnknownField(err error, field string) bool {
	var te *turnctl.Error
	return errors.As(err, &te) && te.Code == turnctl.CodeBadRequest && strings.Contains(te.Message, `"`+field+`"`)
}

// stepIf is h.Step. A daemon older than StepRequest.IfOpenedBy and Turn
// rejects them as unknown fields: then the open turn is checked first
// (not atomically, as endIf does).
func stepIf(ctx context.Context, h turnctl.Handler, req turnctl.StepRequest) (*turnctl.StepReply, error) {
	rep, err := h.Step(ctx, req)
	if !isUnknownField(err, "if_opened_by") && !isUnknownField(err, "turn") && !isUnknownField(err, "run") {
		return rep, err
	}
	if err := checkOpenTurn(ctx, h, req.IfOpenedBy, req.Turn, ": no step"); err != nil {
		return nil, err
	}
	req.IfOpenedBy, req.Turn, req.Run = "", 0, ""
	return h.Step(ctx, req)
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
