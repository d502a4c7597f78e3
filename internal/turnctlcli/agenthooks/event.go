package agenthooks

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"ckptfs/internal/ckpt"
)

// Action is what an agent's event means for the turns.
type Action int

const (
	Ignore Action = iota // an event that marks no boundary
	Begin                // the user submitted a prompt: open a turn
	End                  // the agent finished answering: close the turn
	Step                 // a tool call finished: end the open turn's step
)

func (a Action) String() string {
	return [...]string{"ignore", "begin", "end", "step"}[a]
}

// Event is an agent's hook event mapped onto turns.
type Event struct {
	Action Action
	Name   string // the agent's name for the event (UserPromptSubmit, ...)
	Prompt string // Begin: the whole prompt (cut to ckpt.MaxText bytes); the turn's label is its first line
	Ref    string // the agent's id for the prompt or the answer; may be ""
	Cwd    string // the agent's working directory, if the payload says
	// Session, for an End or a Step, names what the turn it closes or
	// ends a step of must have been opened for (turnctl.OpenedBy): the
	// session id (Claude Code, Gemini CLI), Codex's turn_id. "" when the
	// event names none (Aider, Codex notify): the end closes whatever
	// turn is open.
	Session string
	// Step: the tool that ran, and what it worked on (a file, the
	// first line of a command), cut to one line.
	Tool, ToolLabel string
	// Gemini CLI parses a hook's standard output as JSON: print {} there.
	WantsJSON bool
}

// payload holds the fields turnctl reads from every agent's hook input.
//
// Claude Code (docs.anthropic.com/en/docs/claude-code/hooks, "Hook Input"):
// every event has session_id, transcript_path, cwd, hook_event_name;
// UserPromptSubmit adds prompt, Stop adds stop_hook_active.
//
// Codex CLI (codex-rs/hooks/schema/generated/*.command.input.schema.json
// in openai/codex): the same fields plus turn_id (one id per turn, the same
// in its UserPromptSubmit and Stop) and model; Stop adds
// last_assistant_message. Its older notify program gets one JSON argument
// instead: {"type": "agent-turn-complete", "thread-id", "turn-id", "cwd",
// "input-messages": [...], "last-assistant-message"}.
//
// Gemini CLI (docs/hooks/reference.md in google-gemini/gemini-cli):
// session_id, transcript_path, cwd, hook_event_name, timestamp;
// BeforeAgent adds prompt; AfterAgent adds prompt, prompt_response,
// stop_hook_active; AfterTool adds tool_name and tool_input (Claude Code's
// PostToolUse too, with tool_response).
type payload struct {
	HookEventName  string `json:"hook_event_name"`
	SessionID      string `json:"session_id"`
	TranscriptPath string `json:"transcript_path"`
	Cwd            string `json:"cwd"`
	Prompt         string `json:"prompt"`
	TurnID         string `json:"turn_id"`
	// PostToolUse (Claude Code), AfterTool (Gemini CLI).
	ToolName  string          `json:"tool_name"`
	ToolInput json.RawMessage `json:"tool_input"`

	// Codex notify.
	Type          string   `json:"type"`
	NotifyTurnID  string   `json:"turn-id"`
	InputMessages []string `json:"input-messages"`
}

// Parse maps one hook invocation of agent to an Event. input is what the
// agent wrote on standard input (nil if nothing); args are the arguments
// after the agent's name (Codex's notify passes its JSON there).
func Parse(a *Agent, input []byte, args []string) (Event, error) {
	switch a.Name {
	case "aider":
		// --notifications-command runs with no payload when aider has
		// answered and waits for input: close whatever collected its edits.
		return Event{Action: End, Name: "notification"}, nil
	case "codex":
		for _, arg := range args {
			if strings.HasPrefix(strings.TrimSpace(arg), "{") {
				return parseCodexNotify([]byte(arg))
			}
		}
	}
	if len(bytes.TrimSpace(input)) == 0 {
		return Event{}, fmt.Errorf("no hook input on standard input")
	}
	var p payload
	if err := json.Unmarshal(input, &p); err != nil {
		return Event{}, fmt.Errorf("hook input is not JSON: %v", err)
	}
	ev := Event{Name: p.HookEventName, Cwd: p.Cwd, WantsJSON: a.Name == "gemini"}
	switch p.HookEventName {
	case a.BeginEvent:
		ev.Action = Begin
		ev.Prompt = ckpt.CutText(p.Prompt)
		ev.Ref = promptRef(a, p)
	case a.EndEvent:
		ev.Action = End
		ev.Ref = endRef(a, p)
		ev.Session = p.SessionID
		if a.Name == "codex" && p.TurnID != "" {
			ev.Session = p.TurnID // its prompt's ref (promptRef)
		}
	case a.StepEvent:
		if a.StepEvent == "" {
			ev.Action = Ignore
			break
		}
		ev.Action = Step
		ev.Session = p.SessionID
		ev.Tool = ckpt.LabelOf(p.ToolName)
		ev.ToolLabel = toolLabel(p.ToolInput)
	default:
		ev.Action = Ignore
	}
	return ev, nil
}

// toolLabel says what a tool call worked on, from its input: the file it
// edited or wrote, the command it ran, the pattern it looked for; "" when
// the input names none of them.
func toolLabel(input json.RawMessage) string {
	var in map[string]any
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	for _, k := range []string{"file_path", "path", "notebook_path", "command", "pattern", "url"} {
		if v, ok := in[k].(string); ok && v != "" {
			return ckpt.LabelOf(v)
		}
	}
	return ""
}

// promptRef is the ref of the turn a prompt opens: Codex's turn_id, else
// the session id and a digest of the prompt. The digest makes a repeated
// delivery of the same event recognisable (it names the open turn); when
// the same text is sent again later, hook-event adds a suffix.
func promptRef(a *Agent, p payload) string {
	if a.Name == "codex" && p.TurnID != "" {
		return p.TurnID
	}
	if p.SessionID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(p.Prompt))
	return p.SessionID + ":" + hex.EncodeToString(sum[:4])
}

// endRef is the ref the closing turn gets: Claude Code's last assistant
// message (its uuid in the transcript), Codex's turn_id. Gemini CLI's
// AfterAgent names no message, so its turns keep the prompt's ref only.
func endRef(a *Agent, p payload) string {
	switch a.Name {
	case "claude-code":
		if p.TranscriptPath != "" {
			if id, err := LastAssistantID(p.TranscriptPath); err == nil {
				return id
			}
		}
	case "codex":
		return p.TurnID
	}
	return ""
}

func parseCodexNotify(arg []byte) (Event, error) {
	var p payload
	if err := json.Unmarshal(arg, &p); err != nil {
		return Event{}, fmt.Errorf("notify argument is not JSON: %v", err)
	}
	ev := Event{Name: p.Type, Cwd: p.Cwd, Ref: p.NotifyTurnID}
	if p.Type == "agent-turn-complete" {
		ev.Action = End
	}
	return ev, nil
}
