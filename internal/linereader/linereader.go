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
// reader's maximum is reported, not kept: memory stays bounded whatever
// the input.
type Reader struct {
	br   *bufio.Reader
	max  int
	long []byte
	n    int64 // lines read so far
	err  error // the input's error, returned once the line before it is
}

// New returns a Reader of r whose lines may be up to max bytes.
func New(r io.Reader, max int) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 256<<10), max: max}
}

// Next returns the next line and its number, with ok set; tooLong reports
// a line over the maximum (b is then empty). err is the input's error,
// io.EOF after the last line; a line read before an error comes first,
// with ok set and err nil. b is valid until the next call.
func (lr *Reader) Next() (b []byte, n int64, ok, tooLong bool, err error) {
	if lr.err != nil {
		return nil, lr.n, false, false, lr.err
	}
	b, err = lr.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		lr.long = append(lr.long[:0], b...)
		for err == bufio.ErrBufferFull {
			b, err = lr.br.ReadSlice('\n')
			if !tooLong {
				lr.long = append(lr.long, b...)
				if len(bytes.TrimRight(lr.long, "\r\n")) > lr.max { // the line end is not the line's
					tooLong, lr.long = true, lr.long[:0]
				}
			}
		}
		b = lr.long
	}
	if err != nil {
		lr.err = err
		if len(b) == 0 && !tooLong {
			return nil, lr.n, false, false, err
		}
	}
	lr.n++
	b = bytes.TrimRight(b, "\r\n")
	if lr.n == 1 {
		b = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) // a UTF-8 byte order mark
	}
	if tooLong {
		b = nil
	}
	return b, lr.n, true, tooLong, nil
}

// Buffered reports whether input after the last line returned has already
// arrived: a reader that flushes its output can wait for the last of it.
func (lr *Reader) Buffered() bool { return lr.br.Buffered() > 0 }
