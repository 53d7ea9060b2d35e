// Package workq is the bounded job queue that a cache tier's background
// goroutines drain (the disk tier's writer, the remote tier's pipelined
// writer): jobs are queued without waiting unless the caller asks to wait,
// a job queued after Close is refused rather than sent on a closed
// channel, and Close waits for the goroutines to finish what was queued.
package workq

import (
	"errors"
	"sync"
)

// Errors TryPut returns.
var (
	ErrFull   = errors.New("workq: queue full")
	ErrClosed = errors.New("workq: queue closed")
)

// Queue is a bounded queue of jobs of type T and the goroutines that
// serve it. It is safe for concurrent use.
type Queue[T any] struct {
	mu     sync.RWMutex // guards closed and sends on jobs
	closed bool
	jobs   chan T
	stop   chan struct{}
	wg     sync.WaitGroup
}

// New returns an open queue with room for n jobs.
func New[T any](n int) *Queue[T] {
	return &Queue[T]{jobs: make(chan T, n), stop: make(chan struct{})}
}

// Go runs f on a goroutine that Close waits for. f drains Jobs until it
// is closed, or watches Stop.
func (q *Queue[T]) Go(f func()) {
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		f()
	}()
}

// Jobs is what the queue's goroutines receive from; Close closes it after
// the last job queued.
func (q *Queue[T]) Jobs() <-chan T { return q.jobs }

// Stop is closed by Close, for goroutines that do not drain Jobs.
func (q *Queue[T]) Stop() <-chan struct{} { return q.stop }

// Full reports whether the queue has no room now.
func (q *Queue[T]) Full() bool { return len(q.jobs) == cap(q.jobs) }

// TryPut queues j if there is room now: ErrFull when there is none,
// ErrClosed after Close.
func (q *Queue[T]) TryPut(j T) error {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return ErrClosed
	}
	select {
	case q.jobs <- j:
		return nil
	default:
		return ErrFull
	}
}

// Put queues j, waiting for room; it reports false, queuing nothing,
// after Close.
func (q *Queue[T]) Put(j T) bool {
	q.mu.RLock()
	defer q.mu.RUnlock()
	if q.closed {
		return false
	}
	q.jobs <- j
	return true
}

// Close refuses further jobs, closes Jobs and Stop, and waits for the
// goroutines started by Go. Only the first call does anything; every
// call returns after the goroutines have.
func (q *Queue[T]) Close() {
	q.mu.Lock()
	if !q.closed {
		q.closed = true
		close(q.jobs)
		close(q.stop)
	}
	q.mu.Unlock()
	q.wg.Wait()
}
