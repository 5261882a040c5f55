// Package linereader reads the lines of JSON lines input with bounded memory,
// for the readers of such input in the storh module: jsonl.Import, and
// the CLI's put from stdin and its import over HTTP. It lives at the root
// of the module, the one internal place both cmd/storh and storh/jsonl can
// import.
package linereader

import (
	"bufio"
	"bytes"
	"io"
)

// Reader returns the lines of its input without their line end, the
// byte order mark of the first line removed. A line longer than the
// reader's maximum is reported, not kept, as soon as it passes the maximum:
// memory stays bounded whatever the input, and a line without end (a
// stream that is not what the reader expects) does not keep Next reading.
type Reader struct {
	br   *bufio.Reader
	max  int
	long []byte
	n    int64 // lines read so far
	err  error // the input's error, returned once the line before it is
	skip bool  // the line last reported too long goes on: skip its rest
}

// New returns a Reader of r whose lines may be up to max bytes.
func New(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 256<<10), max: max}
}

// Next returns the next line and its number, with ok set; tooLong reports
// a line over the maximum (b is then empty), before its end has been read:
// the next call skips the rest of it. err is the input's error, io.EOF
// after the last line; a line read before an error comes first, with ok
// set and err nil. b is valid until the next call.
func (lr *Reader) Next() (b []byte, n int64, ok, tooLong bool, err error) {
	if lr.skip && lr.err == nil {
		lr.skip = false
		for err = bufio.ErrBufferFull; err == bufio.ErrBufferFull; {
			_, err = lr.br.ReadSlice('\n')
		}
		lr.err = err
	}
	if lr.err != nil {
		return nil, lr.n, false, false, lr.err
	}
	b, err = lr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		lr.long = append(lr.long[:0], b...)
		for err == bufio.ErrBufferFull {
			// No line end yet, but for a "\r" that may start one.
			if len(bytes.TrimRight(lr.long, "\r")) > lr.max {
				lr.skip, lr.long = true, lr.long[:0]
				lr.n++
				return nil, lr.n, true, true, nil
			}
			b, err = lr.br.ReadSlice('\n')
			lr.long = append(lr.long, b...)
		}
		b = lr.long
		tooLong = len(bytes.TrimRight(b, "\r\n")) > lr.max // the line end is not the line's
	}
	if err != nil {
		lr.err = err
		if len(b) == 0 {
			return nil, lr.n, false, false, err
		}
	}
	lr.n++
	b = bytes.TrimRight(b, "\r\n")
	if lr.n == 1 {
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	}
	if tooLong {
		b, lr.long = nil, lr.long[:0]
	}
	return b, lr.n, true, tooLong, nil
}

// Buffered reports whether input after the last line returned has already
// arrived: a reader that flushes its output can wait for the last of it.
func (lr *Reader) Buffered() bool { return lr.br.Buffered() > 0 }
