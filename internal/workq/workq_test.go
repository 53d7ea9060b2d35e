package workq

import (
	"errors"
	"sync"
	"testing"
)

func TestTryPutFullAndClosed(t *testing.T) {
	q := New[int](2)
	for i := range 2 {
		if err := q.TryPut(i); err != nil {
			t.Fatalf("TryPut %d: %v", i, err)
		}
	}
	if !q.Full() {
		t.Fatal("Full is false with 2 of 2 queued")
	}
	if err := q.TryPut(2); !errors.Is(err, ErrFull) {
		t.Fatalf("TryPut on a full queue: %v, want ErrFull", err)
	}
	var got []int
	q.Go(func() {
		for j := range q.Jobs() {
			got = append(got, j)
		}
	})
	q.Close()
	if len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Fatalf("the worker drained %v, want [0 1]: Close must wait for it", got)
	}
	if err := q.TryPut(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryPut after Close: %v, want ErrClosed", err)
	}
	if q.Put(3) {
		t.Fatal("Put after Close queued a job")
	}
	q.Close() // a second Close does nothing
}

func TestStopClosed(t *testing.T) {
	q := New[int](1)
	stopped := false
	q.Go(func() {
		<-q.Stop()
		stopped = true
	})
	q.Close()
	if !stopped {
		t.Fatal("Close returned before the goroutine watching Stop ended")
	}
}

// TestPutRacesClose: jobs queued while another goroutine closes the queue
// are either drained or refused, never lost or sent on a closed channel.
func TestPutRacesClose(t *testing.T) {
	for range 50 {
		q := New[int](4)
		drained := 0
		q.Go(func() {
			for range q.Jobs() {
				drained++
			}
		})
		var wg sync.WaitGroup
		var mu sync.Mutex
		queued := 0
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 100 {
					var ok bool
					if w%2 == 0 {
						ok = q.Put(i)
					} else {
						ok = q.TryPut(i) == nil
					}
					if ok {
						mu.Lock()
						queued++
						mu.Unlock()
					}
				}
			}()
		}
		q.Put(-1) // at least one job before Close
		q.Close()
		wg.Wait()
		queued++
		if drained != queued {
			t.Fatalf("drained %d jobs, queued %d", drained, queued)
		}
	}
}
