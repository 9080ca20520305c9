package smartdev

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// pollInterval bounds how long the Events goroutine waits on the wake descriptor before it looks at its
// context again (and how often it polls without a wake flag). Close waits at most this long for it.
const pollInterval = 200 * time.Millisecond

// PullEvent takes the oldest webhook event, or returns (nil, nil) when none is queued. Events and PullEvent
// take from the same queue: use one or the other.
func (c *Controller) PullEvent() (*Event, error) {
	if e := c.unstash(); e != nil {
		return e, nil
	}
	return c.pull()
}

// pull takes one event from the library's queue.
func (c *Controller) pull() (*Event, error) {
	var data []byte
	err := c.use(func(p *C.sd_controller) (err error) {
		data, err = readText(func(b *C.char, n C.size_t, nd *C.size_t, m **C.char) C.sd_result {
			return C.sdgo_pull_event(p, b, n, nd, m)
		})
		return err
	})
	if err != nil || data == nil {
		return nil, err
	}
	e := new(Event)
	if err := json.Unmarshal(data, e); err != nil {
		return nil, err
	}
	return e, nil
}

func (c *Controller) unstash() *Event {
	c.stashMu.Lock()
	defer c.stashMu.Unlock()
	if len(c.stash) == 0 {
		return nil
	}
	e := c.stash[0]
	c.stash = c.stash[1:]
	return &e
}

func (c *Controller) restash(e Event) {
	c.stashMu.Lock()
	c.stash = append([]Event{e}, c.stash...)
	c.stashMu.Unlock()
}

// Events delivers webhook events on the returned (unbuffered) channel until ctx is done or the controller is
// closed; then the channel is closed. A goroutine waits on the library's wake descriptor with poll(2) in
// 200 ms slices (so it notices ctx and Close), clears the wake flag and then drains the queue, which misses no
// event: one arriving during the drain sets the flag again. An event taken from the library but not received
// before ctx ended is kept and returned first by the next PullEvent or Events. Decoding failures are dropped.
// Without a wake flag (WithoutWake) the queue is polled every 200 ms instead. On a closed controller the
// channel is closed at once.
func (c *Controller) Events(ctx context.Context) <-chan Event {
	ch := make(chan Event)
	go c.eventLoop(ctx, ch)
	return ch
}

func (c *Controller) eventLoop(ctx context.Context, ch chan<- Event) {
	defer close(ch)
	ready := true // drain first: events (or a stash) may be waiting already
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		default:
		}
		if ready {
			if !c.drain(ctx, ch) {
				return
			}
		}
		var err error
		ready, err = c.waitReadable()
		if err != nil {
			return // closed, or the descriptor failed
		}
	}
}

// waitReadable waits up to pollInterval for events and, when there are some, clears the wake flag (before
// the caller drains the queue). Without a wake flag it just sleeps and reports ready.
func (c *Controller) waitReadable() (bool, error) {
	if !c.wake {
		t := time.NewTimer(pollInterval)
		defer t.Stop()
		select {
		case <-t.C:
			return true, nil
		case <-c.done:
			return false, ErrClosed
		}
	}
	ready := false
	// The read lock is held during poll(2) so that Close cannot close the descriptor under it.
	err := c.use(func(p *C.sd_controller) error {
		fd := C.sd_wake_fd(p)
		if fd < 0 {
			return &Error{Code: int(C.SD_IO), Message: "the controller has no wake descriptor"}
		}
		switch C.sdgo_wait_readable(fd, C.int(pollInterval/time.Millisecond)) {
		case 0:
			return nil
		case 1:
			ready = true
			var msg *C.char
			return check(C.sdgo_wake_clear(p, &msg), msg)
		default:
			return &Error{Code: int(C.SD_IO), Message: "poll on the wake descriptor failed"}
		}
	})
	return ready, err
}

// drain delivers every queued event; false when the loop must stop (ctx done, controller closed).
func (c *Controller) drain(ctx context.Context, ch chan<- Event) bool {
	for {
		e := c.unstash()
		if e == nil {
			var err error
			e, err = c.pull()
			if err != nil {
				var le *Error
				if !errors.As(err, &le) {
					continue // an undecodable event was taken from the queue: skip it
				}
				// A library failure: stop when closed, otherwise wait for the next wake-up and retry.
				return le.Code != int(C.SD_CLOSED)
			}
			if e == nil {
				return true
			}
		}
		select {
		case ch <- *e:
		case <-ctx.Done():
			c.restash(*e)
			return false
		case <-c.done:
			return false
		}
	}
}
