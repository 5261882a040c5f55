package main

import (
	"bufio"
	"bytes"
	"io"

	"github.com/storhdb/storh-go/storh/jsonl"
)

// maxLine bounds one input line: the limit of jsonl.Import, which reads the
// lines of storh import.
const maxLine = jsonl.MaxLine

// lineReader reads the lines of JSON lines input (put from stdin), as
// jsonl.Import reads those of storh import:
// without their line end, the byte order mark of the first line removed.
// A line longer than maxLine is reported, not kept: memory stays bounded
// whatever the input.
type lineReader struct {
	br   *bufio.Reader
	long []byte
	n    int64 // lines read so far
	err  error // the input's error, returned once the line before it is
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 256<<10)}
}

// next returns the next line and its number, with ok set; tooLong reports
// a line over maxLine (b is then empty). err is the input's error, io.EOF
// after the last line; a line read before an error comes first, with ok
// set and err nil. b is valid until the next call.
func (lr *lineReader) next() (b []byte, n int64, ok, tooLong bool, err error) {
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
				if len(lr.long) > maxLine {
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
