package kvstore

import "testing"

// decideOpen follows the package doc's table: closed cleanly → trusted (cheap checks
// only); left open by a dead process on this boot → full check; left open across a
// restart → full check with fsync, moved aside with NoSync; no readable state file or
// an unknown state → full check; found damaged → moved aside. Verify forces or skips
// the full check.
func TestDecideOpen(t *testing.T) {
	const boot = "boot-2"
	for _, tc := range []struct {
		name     string
		st       boltState
		readable bool
		mode     VerifyMode
		previous CloseState
		verify   bool
		moved    bool
	}{
		{"closed cleanly", boltState{State: "closed"}, true, VerifyUnclean, StateClean, false, false},
		{"process died, same boot", boltState{State: "open", Boot: boot}, true, VerifyUnclean, StateCrashed, true, false},
		{"process died, same boot, NoSync", boltState{State: "open", Boot: boot, NoSync: true}, true, VerifyUnclean, StateCrashed, true, false},
		{"machine restarted, fsync", boltState{State: "open", Boot: "boot-1"}, true, VerifyUnclean, StateRestart, true, false},
		{"machine restarted, NoSync", boltState{State: "open", Boot: "boot-1", NoSync: true}, true, VerifyUnclean, StateRestart, false, true},
		{"no readable state file", boltState{}, false, VerifyUnclean, StateUnknown, true, false},
		{"unknown state", boltState{State: "strange"}, true, VerifyUnclean, StateUnknown, true, false},
		{"found damaged", boltState{State: "damaged", Reason: "bad page"}, true, VerifyUnclean, StateDamaged, false, true},
		{"closed cleanly, VerifyAlways", boltState{State: "closed"}, true, VerifyAlways, StateClean, true, false},
		{"process died, VerifyNever", boltState{State: "open", Boot: boot}, true, VerifyNever, StateCrashed, false, false},
		{"found damaged, VerifyAlways", boltState{State: "damaged"}, true, VerifyAlways, StateDamaged, false, true},
	} {
		d := decideOpen(tc.st, tc.readable, boot, tc.mode)
		if d.previous != tc.previous || d.verify != tc.verify || (d.reason != "") != tc.moved {
			t.Errorf("%s: %+v; want previous %s, verify %v, moved aside %v", tc.name, d, tc.previous, tc.verify, tc.moved)
		}
	}
	// Where the boot ID is unknown, every unclean close counts as a restart.
	if d := decideOpen(boltState{State: "open", Boot: "", NoSync: true}, true, "", VerifyUnclean); d.previous != StateRestart || d.reason == "" {
		t.Errorf("unknown boot, NoSync: %+v; want moved aside as a restart", d)
	}
}
