package rundir

import (
	"os"
	"testing"
)

func TestParent(t *testing.T) {
	if got := Parent(os.Getpid()); got != os.Getppid() {
		t.Errorf("Parent(self) = %d, want %d", got, os.Getppid())
	}
	if got := Parent(-1); got != 0 {
		t.Errorf("Parent(-1) = %d", got)
	}
}

func TestAliveAndStopped(t *testing.T) {
	if !Alive(os.Getpid()) || Stopped(os.Getpid()) {
		t.Errorf("this process: alive %v, stopped %v", Alive(os.Getpid()), Stopped(os.Getpid()))
	}
	if Alive(-1) {
		t.Error("Alive(-1)")
	}
}
