package turnctlcli

import (
	"fmt"
	"maps"
	"testing"
	"time"

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

// sameTurn tells this history's turn from another's: by the Ckptfs-End
// trailer, else (an older export) by the commit's date; a turn no longer
// kept cannot be told and counts as the same.
func TestSameTurn(t *testing.T) {
	at := time.Date(2026, 11, 29, 17, 0, 0, 123456789, time.UTC)
	turns := []ckpt.Turn{{Num: 0, Start: at.Add(-time.Hour)}, {Num: 4, Start: at.Add(-time.Minute), End: at}}
	commit := func(date int64, trailer string) string {
		return fmt.Sprintf("tree x\nauthor ckptfs <ckptfs@localhost> %d +0000\ncommitter ckptfs <ckptfs@localhost> %d +0000\n\nsubject\n\nCkptfs-Turn: 4\n%s", date, date, trailer)
	}
	end := at.Unix()
	for _, c := range []struct {
		commit string
		n      uint64
		want   bool
	}{
		{commit(end, "Ckptfs-End: "+at.Format(time.RFC3339Nano)+"\n"), 4, true},
		{commit(end, "Ckptfs-End: "+at.Add(time.Nanosecond).Format(time.RFC3339Nano)+"\n"), 4, false},
		{commit(end, ""), 4, true},
		{commit(end+1, ""), 4, false},
		{commit(end+1, ""), 3, true},
	} {
		if got := sameTurn(c.commit, turns, c.n); got != c.want {
			t.Errorf("sameTurn(turn %d) of\n%s\n= %v, want %v", c.n, c.commit, got, c.want)
		}
	}
}
