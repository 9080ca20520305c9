package smartdev

// This file has an //export directive, so its preamble may hold declarations only.

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import (
	"sync"
)

// The library calls its log callback from any of its threads, possibly concurrently, with an opaque `user`
// pointer. The binding never hands a Go pointer to C for this: `user` carries a small integer key into the
// registry below, and the C trampoline (sdgo.c) passes it back to sdgoLog.
//
// The library has one process-wide log slot: the most recent Open with WithLogger receives the records of
// every controller from then on. Records arriving for a key whose controller was closed are dropped.

type logEntry struct {
	mu sync.Mutex // serialises calls, so a logger function never runs concurrently with itself
	fn func(level int, msg string)
}

var (
	logMu   sync.RWMutex
	logNext uintptr
	logFns  = map[uintptr]*logEntry{}
)

// registerLogger stores fn and returns its key (never 0; 0 means "no logger" to sdgo_open).
func registerLogger(fn func(level int, msg string)) uintptr {
	logMu.Lock()
	defer logMu.Unlock()
	logNext++
	logFns[logNext] = &logEntry{fn: fn}
	return logNext
}

// unregisterLogger forgets a key; later records for it are dropped.
func unregisterLogger(key uintptr) {
	if key == 0 {
		return
	}
	logMu.Lock()
	delete(logFns, key)
	logMu.Unlock()
}

//export sdgoLog
func sdgoLog(key C.uintptr_t, level C.int, msg *C.char) {
	logMu.RLock()
	e := logFns[uintptr(key)]
	logMu.RUnlock()
	if e == nil || msg == nil {
		return
	}
	text := C.GoString(msg) // the message is valid only during this call: copy it first
	e.mu.Lock()
	defer e.mu.Unlock()
	// A panic must not unwind into the library's (non-Go) thread: that would abort the process.
	defer func() { _ = recover() }()
	e.fn(int(level), text)
}
