package turnctlcli

import (
	"fmt"
	"maps"
	"testing"

	"ckptfs/internal/ckpt"
)

// leftIn reads back every path commitMessage names as missing from the
// tree, not the mode notes, and nil when the message cut the list short.
func TestLeftInReadsCommitMessageBack(t *testing.T) {
	notes := []string{"pipe (a FIFO)", "d/s (a socket)", "we (ird) (bytes never captured)",
		"h (a hard link of x (1), which is not exported)", "m (mode 0600, kept as 644)"}
	want := map[string]string{"pipe": notes[0], "d/s": notes[1], "we (ird)": notes[2], "h": notes[3]}
	msg := commitMessage(nil, ckpt.Turn{Num: 3, Label: "l", Prompt: "l"}, notes)
	if got := leftIn(msg); !maps.Equal(got, want) {
		t.Errorf("leftIn:\n%v\nwant\n%v\nof\n%s", got, want, msg)
	}
	var many []string
	for i := range 25 {
		many = append(many, fmt.Sprintf("p%02d (a FIFO)", i))
	}
	if got := leftIn(commitMessage(nil, ckpt.Turn{Num: 3, Label: "l", Prompt: "l"}, many)); got != nil {
		t.Errorf("leftIn of a list cut short: %v; want nil", got)
	}
	if got := leftIn("subject\n\nCkptfs-Turn: 3\n"); got == nil || len(got) != 0 {
		t.Errorf("leftIn of a message naming nothing: %v", got)
	}
}
