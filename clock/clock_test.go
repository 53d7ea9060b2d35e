package clock

import (
	"testing"
	"time"
)

func TestFakeAdvances(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	f := NewFake(start)
	if !f.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", f.Now(), start)
	}
	f.Advance(90 * time.Second)
	if got := f.Now().Sub(start); got != 90*time.Second {
		t.Fatalf("advanced %v, want 90s", got)
	}
	var c Clock = Real{}
	if c.Now().IsZero() {
		t.Fatal("Real clock reads the zero time")
	}
}
