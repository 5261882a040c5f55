package codec_test

import "unsafe"

func unsafePtr[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }
