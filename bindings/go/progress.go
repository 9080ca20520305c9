package smartdev

// This file has an //export directive, so its preamble may hold declarations only.

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#include "sdgo.h"
*/
import "C"

import "runtime/cgo"

// A firmware update's progress callback runs on the thread of the cgo call that updates (the library calls it
// before sd_update_firmware_progress returns). A Go pointer may not be handed to C, so `user_data` carries a
// cgo.Handle of the call's progressListener; the C trampoline (sdgo.c) passes it back to sdgoUpdateProgress.

type progressListener struct {
	fn         func(UpdateProgress)
	panicked   bool // a call of fn panicked: later steps are not delivered, the panic is raised after the update
	panicValue any
}

//export sdgoUpdateProgress
func sdgoUpdateProgress(handle C.uintptr_t, step C.int, from, to *C.char, percent C.int) {
	l := cgo.Handle(handle).Value().(*progressListener)
	if l.panicked {
		return
	}
	// A panic must not unwind through the library's frames (the update would not finish its bookkeeping):
	// keep it and raise it again once the library has returned.
	defer func() {
		if v := recover(); v != nil {
			l.panicked, l.panicValue = true, v
		}
	}()
	// The strings are valid only during this call: copy them first.
	p := UpdateProgress{Step: UpdateStep(step), From: goVersion(from), To: goVersion(to)}
	if percent >= 0 {
		n := int(percent)
		p.Percent = &n
	}
	l.fn(p)
}

// goVersion copies a version from C; NULL (unknown) is nil.
func goVersion(v *C.char) *string {
	if v == nil {
		return nil
	}
	s := C.GoString(v)
	return &s
}
