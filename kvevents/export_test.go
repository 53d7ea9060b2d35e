package kvevents

// HoldSends stops the publishing goroutine at its next send, as a slow
// socket would, until release is called: batches ended meanwhile fill the
// queue and then merge.
func (p *Publisher) HoldSends() (release func()) {
	p.mu.Lock()
	return p.mu.Unlock
}
