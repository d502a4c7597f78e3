package rundir

import (
	"os"
	"strings"
	"testing"
)

func TestSuperUID(t *testing.T) {
	for opts, want := range map[string]int{
		"rw,user_id=0,group_id=0,default_permissions,allow_other,max_read=1048576": 0,
		"rw,user_id=1000,group_id=1000,max_read=1048576":                           1000,
		"rw,relatime": -1,
		"user_id=x":   -1,
	} {
		if got := superUID(opts); got != want {
			t.Errorf("superUID(%q) = %d, want %d", opts, got, want)
		}
	}
}

func TestMine(t *testing.T) {
	me := os.Geteuid()
	if err := (Mount{Dir: "/p", UID: me}).Mine(); err != nil {
		t.Errorf("own mount: %v", err)
	}
	if err := (Mount{Dir: "/p", UID: -1}).Mine(); err != nil {
		t.Errorf("owner not shown: %v", err)
	}
	err := (Mount{Dir: "/p", UID: me + 1}).Mine()
	if _, ok := err.(*ForeignError); !ok || !strings.HasPrefix(err.Error(), "/p is mounted by uid ") || !strings.HasSuffix(err.Error(), "; ask its owner") {
		t.Errorf("another user's mount: %v", err)
	}
}
