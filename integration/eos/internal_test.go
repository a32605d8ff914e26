//go:build unix

package eos

import (
	"os"
	"strings"
	"testing"
	"time"
)

// Race reports are cut out of an instance's log, whole, among other lines and however
// the pipe splits them.
func TestRaceReports(t *testing.T) {
	raw, err := os.ReadFile("testdata/sarama-race.txt")
	if err != nil {
		t.Fatal(err)
	}
	p := &process{}
	p.file, err = os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer p.file.Close()
	other := strings.ReplaceAll(string(raw), "github.com/IBM/sarama.(*transactionManager).transitionTo()", "github.com/eddy-streams/eddy.(*taskRunner).commit()")
	for _, chunk := range []string{"{\"msg\":\"before\"}\n", string(raw), "{\"msg\":\"between\"}\n", other, "{\"msg\":\"after\"}\n"} {
		// in odd pieces, as a pipe delivers them
		for len(chunk) > 0 {
			n := min(len(chunk), 97)
			if _, err := p.Write([]byte(chunk[:n])); err != nil {
				t.Fatal(err)
			}
			chunk = chunk[n:]
		}
	}
	reports := p.raceReports()
	if len(reports) != 2 {
		t.Fatalf("%d race reports, want 2", len(reports))
	}
	if !strings.Contains(reports[0], "sarama.(*transactionManager).transitionTo()") || !strings.Contains(reports[0], "Previous read at") {
		t.Errorf("first report cut short:\n%s", reports[0])
	}
	if !strings.Contains(reports[1], "eddy.(*taskRunner).commit()") || strings.Contains(reports[1], "before") || strings.Contains(reports[1], "between") {
		t.Errorf("second report wrong:\n%s", reports[1])
	}
}

// A restore line an instance logs is parsed back.
func TestParseRestoreLine(t *testing.T) {
	line := `{"time":"2026-11-30T08:24:34.027429877Z","level":"INFO","msg":"eos-restore","instance":"i0#1","task":"1_3","store":"bucket-count","from":15,"to":28,"records":9,"wiped":false,"took":13112497}`
	ev, ok := parseRestoreLine([]byte(line))
	if !ok || ev != (RestoreEvent{Task: "1_3", Store: "bucket-count", From: 15, To: 28, Records: 9}) {
		t.Fatalf("got %+v, %v", ev, ok)
	}
	if _, ok := parseRestoreLine([]byte(`{"msg":"store restored","task":"1_3"}`)); ok {
		t.Fatal("another line taken for a restore line")
	}
}

// The fault plan is reproducible from its seed, has every kind, and keeps its gaps.
func TestPlanFaults(t *testing.T) {
	c := PlanConfig{Seed: 42, Faults: 7, BrokerRestarts: 2, Instances: 3, Gap: 3 * time.Second, Pause: 8 * time.Second}
	a, endA := PlanFaults(c)
	b, endB := PlanFaults(c)
	if len(a) != 9 || endA != endB {
		t.Fatalf("plan of %d faults ending at %v/%v", len(a), endA, endB)
	}
	kinds := map[FaultKind]int{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("fault %d differs: %v / %v", i, a[i], b[i])
		}
		kinds[a[i].Kind]++
		if i > 0 && a[i].At < a[i-1].At+a[i-1].Down+a[i-1].After {
			t.Errorf("fault %d at %v overlaps the previous one (%v)", i, a[i], a[i-1])
		}
		if a[i].Kind == Pause && a[i].Down < c.Pause {
			t.Errorf("pause %v shorter than %v", a[i], c.Pause)
		}
	}
	if kinds[Kill] == 0 || kinds[Term] == 0 || kinds[Pause] == 0 || kinds[BrokerKill] != 2 || a[0].Kind == BrokerKill {
		t.Errorf("kinds %v, first %v", kinds, a[0].Kind)
	}
}

// Cluster faults come on top of the instance faults: each kind once when the count
// allows, never first, each with a target; a plan without them is the plan it was
// before they existed.
func TestPlanClusterFaults(t *testing.T) {
	base := PlanConfig{Seed: 7, Faults: 3, Instances: 3, Gap: 3 * time.Second, Pause: 8 * time.Second}
	before, _ := PlanFaults(base)
	c := base
	c.ClusterFaults, c.BrokerPause = 9, 6*time.Second
	plan, _ := PlanFaults(c)
	if len(plan) != 12 {
		t.Fatalf("%d faults, want 12", len(plan))
	}
	if plan[0].Kind.IsClusterFault() {
		t.Errorf("first fault %v is a cluster fault", plan[0])
	}
	kinds := map[FaultKind]int{}
	var instance []Fault
	for _, f := range plan {
		kinds[f.Kind]++
		switch {
		case !f.Kind.IsClusterFault():
			instance = append(instance, f)
		case f.Kind == PauseBroker && f.Down < c.BrokerPause:
			t.Errorf("broker pause %v shorter than %v", f, c.BrokerPause)
		}
	}
	for _, k := range ClusterFaultKinds() {
		if kinds[k] == 0 {
			t.Errorf("no %v in %v", k, kinds)
		}
	}
	if len(instance) != len(before) {
		t.Fatalf("%d instance faults, want %d", len(instance), len(before))
	}
	for i := range before {
		if instance[i].Kind != before[i].Kind || instance[i].Instance != before[i].Instance || instance[i].Down != before[i].Down {
			t.Errorf("instance fault %d: %v, was %v without cluster faults", i, instance[i], before[i])
		}
	}
	for _, k := range ClusterFaultKinds() {
		if got, err := ParseFaultKind(k.String()); err != nil || got != k {
			t.Errorf("ParseFaultKind(%q) = %v, %v", k.String(), got, err)
		}
	}
}
