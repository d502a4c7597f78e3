package turnctlcli

import (
	"fmt"

	"github.com/spf13/pflag"

	"ckptfs/turnctl"
)

// step.go: turnctl step, a step boundary inside the open turn, and how
// steps are named.

var stepCmd = &command{
	name:  "step",
	args:  "[--tool NAME] [--label TEXT]",
	short: "end the open turn's current step (one tool call's changes)",
	long: `Ends the open turn's current step and starts the next: the changes made
since the last step boundary (one tool call of an agent: hooks install wires
Claude Code's PostToolUse and Gemini CLI's AfterTool to it) become one step.
Steps are numbered from 1 within their turn: turnctl show 3 lists them, and
3.2 names the state at the end of step 2 of turn 3 wherever a TURN is taken
(rewind 3.2, diff 3.1 3.2, revert 3.2, show 3.2, cat 3.2 PATH, checkout).
A step that changed nothing is not kept. Prints the step ended, or nothing.`,
	mount: true,
	opts:  func() options { return &stepOptions{} },
}

type stepOptions struct {
	tool, label string
}

func (o *stepOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.tool, "tool", "", "the tool that ran (`NAME`: Edit, Bash)")
	fs.StringVar(&o.label, "label", "", "what the step did (`TEXT`)")
}

func (o *stepOptions) run(e *env, args []string) error {
	if err := wantArgs(args, 0, 0); err != nil {
		return err
	}
	rep, err := e.h.Step(e.ctx, turnctl.StepRequest{Tool: o.tool, Label: o.label})
	if err != nil {
		return err
	}
	if e.json {
		return e.printJSON(jStepReply(rep))
	}
	if rep.Step != nil {
		fmt.Fprintf(e.stdout, "step %d.%d\n", rep.Step.Turn, rep.Step.Num)
	}
	return nil
}

// pointWord names a turn's end or a step's in a sentence: "turn 3",
// "step 3.2".
func pointWord(turn uint64, step int) string {
	if step > 0 {
		return fmt.Sprintf("step %d.%d", turn, step)
	}
	return fmt.Sprintf("turn %d", turn)
}
