package server

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/prefixd/prefixd/engine"
)

// TestResultError checks the HTTP status of each way a generation ends:
// pins that took an admitted request's room are the server's state (503,
// retry later), any other failure a 500, a cut at the drain deadline 503.
func TestResultError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		res    engine.Result
		status int
		typ    string
	}{
		{"finished", engine.Result{Finish: engine.FinishLength}, 0, ""},
		{"no room", engine.Result{Finish: engine.FinishError, Err: fmt.Errorf("%w: it lacks 3 of the pool's 8 blocks; operator pins hold 6", engine.ErrNoRoom)}, 503, typeUnavailable},
		{"model failure", engine.Result{Finish: engine.FinishError, Err: errors.New("forward pass failed")}, 500, typeServer},
		{"cancelled", engine.Result{Finish: engine.FinishCancelled}, 503, typeUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			aerr := resultError(&tc.res)
			if tc.status == 0 {
				if aerr != nil {
					t.Fatalf("got %+v, want no error", aerr)
				}
				return
			}
			if aerr == nil || aerr.Status != tc.status || aerr.Type != tc.typ {
				t.Fatalf("got %+v, want %d %s", aerr, tc.status, tc.typ)
			}
			if tc.res.Err != nil && !strings.Contains(aerr.Message, tc.res.Err.Error()) {
				t.Errorf("message %q does not say %q", aerr.Message, tc.res.Err)
			}
		})
	}
}
