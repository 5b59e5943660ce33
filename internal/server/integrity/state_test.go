package integrity

import (
	"errors"
	"testing"

	"github.com/mewledger/ledger/api"
)

func TestStateKeepsTheFirstDamageAndClears(t *testing.T) {
	var s State
	var changes []*api.LogDamage
	s.OnChange = func(d *api.LogDamage) { changes = append(changes, d) }
	if err := s.Touches(1, 100); err != nil {
		t.Fatalf("no damage, yet %v", err)
	}
	if _, _, ok := s.SignLimit(); ok {
		t.Fatal("a sign limit with no damage")
	}
	d20 := NewDamage(api.DamageAltered, 20, "exp", "got")
	if !s.Report(d20) || s.Report(d20) {
		t.Fatal("the first report must change the state, the same one again not")
	}
	if s.Report(NewDamage(api.DamageMissing, 30, "", "")) {
		t.Fatal("a later sequence replaced the first damage")
	}
	if !s.Report(NewDamage(api.DamageMissing, 5, "x", "")) {
		t.Fatal("an earlier sequence did not replace the damage")
	}
	if d, _ := s.Current(); d.Seq != 5 || d.Kind != api.DamageMissing {
		t.Fatalf("current %+v", d)
	}
	if lim, why, ok := s.SignLimit(); !ok || lim != 4 || why == "" {
		t.Fatalf("sign limit %d %q %v", lim, why, ok)
	}
	if err := s.Touches(6, 10); err != nil {
		t.Fatalf("a range after the damage touches it: %v", err)
	}
	err := s.Touches(1, 5)
	if d, ok := Damage(err); !ok || !errors.Is(err, ErrDamaged) || d.Seq != 5 {
		t.Fatalf("touching the damage: %v", err)
	}
	if s.Clear(api.DamageAltered, 5) || !s.Clear(api.DamageMissing, 5) {
		t.Fatal("Clear must match kind and seq")
	}
	if _, ok := s.Current(); ok || s.Findings() != 3 || len(changes) != 3 || changes[2] != nil {
		t.Fatalf("after clearing: findings %d, changes %v", s.Findings(), changes)
	}
	s.Report(NewDamage(api.DamageRewritten, 7, "a", "b"))
	if err := s.Touches(100, 200); err == nil {
		t.Fatal("a rewritten tree must touch every proof")
	}
}
