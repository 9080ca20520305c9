package smartdev

// This file has an //export directive, so its preamble may hold declarations only.

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
)

// The library calls a controller's log callback with that controller's records only, from any of its threads
// (possibly concurrently), from the start of sd_open until sd_close returns — never after, and never after a
// failed sd_open. A Go pointer may not be handed to C, so `user` carries a cgo.Handle of the controller's
// logEntry; the C trampoline (sdgo.c) passes it back to sdgoLog. The handle is deleted once sd_close (or the
// failed sd_open) has returned.

type logEntry struct {
	mu sync.Mutex // serialises calls, so a logger function never runs concurrently with itself
	fn func(level int, msg string)
}

// newLogHandle wraps fn for the C side; Delete the handle after sd_close returns.
func newLogHandle(fn func(level int, msg string)) cgo.Handle {
	return cgo.NewHandle(&logEntry{fn: fn})
}

//export sdgoLog
func sdgoLog(handle C.uintptr_t, level C.int, msg *C.char) {
	// A panic must not unwind into the library's (non-Go) thread: that would abort the process.
	defer func() { _ = recover() }()
	if msg == nil {
		return
	}
	e := cgo.Handle(handle).Value().(*logEntry)
	text := C.GoString(msg) // the message is valid only during this call: copy it first
	e.mu.Lock()
	defer e.mu.Unlock()
	e.fn(int(level), text)
}
