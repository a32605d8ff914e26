package sinktxn

import (
	"strings"
	"testing"
)

func TestIDRoundTripsAndPrefixesOnlyItsTask(t *testing.T) {
	id := ID{App: "shop.orders-v2", Task: "1_12", Node: "to-pg", Nonce: 0xfedcba9876543211}
	s := id.String()
	if s != "eddy:shop.orders-v2:1_12:to-pg:fedcba9876543211" {
		t.Fatalf("String() = %q", s)
	}
	got, err := ParseID(s)
	if err != nil || got != id {
		t.Fatalf("ParseID(%q) = %+v, %v; want %+v", s, got, err, id)
	}
	if !strings.HasPrefix(s, id.TaskPrefix()) {
		t.Fatalf("%q does not start with its task prefix %q", s, id.TaskPrefix())
	}
	// Task 1_1 must not find task 1_12's transactions, nor node "to" node "to-pg"'s.
	for _, other := range []ID{{App: "shop.orders-v2", Task: "1_1", Node: "to-pg"}, {App: "shop.orders-v2", Task: "1_12", Node: "to"}, {App: "shop.orders", Task: "1_12", Node: "to-pg"}} {
		if strings.HasPrefix(s, other.TaskPrefix()) {
			t.Errorf("%q starts with another task's prefix %q", s, other.TaskPrefix())
		}
	}
	for _, bad := range []string{"xeddy:a:0_0:n:0000000000000001", "eddy:a:0_0:n", "eddy:a:0_0:n:1", "eddy:a:0_0:n:zz00000000000001"} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted it", bad)
		}
	}
}

func TestCheckNameRefusesTheSeparator(t *testing.T) {
	for _, ok := range []string{"db", "to-pg", "KSTREAM-SINK-0000000003", "a.b_c"} {
		if err := CheckName("sink node name", ok); err != nil {
			t.Errorf("CheckName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a:b", "a b", "ü"} {
		if err := CheckName("sink node name", bad); err == nil {
			t.Errorf("CheckName(%q) accepted it", bad)
		}
	}
}
