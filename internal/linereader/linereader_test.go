package linereader

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

type line struct {
	text    string
	n       int64
	tooLong bool
}

// read returns every line of r and the error that ended them.
func read(r io.Reader, max int) ([]line, error) {
	lr := New(r, max)
	var out []line
	for {
		b, n, ok, tooLong, err := lr.Next()
		if !ok {
			return out, err
		}
		out = append(out, line{string(b), n, tooLong})
	}
}

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 600<<10) // past bufio's buffer of 256 KiB
	for _, tc := range []struct {
		name, in string
		max      int
		want     []line
	}{
		{"empty", "", 10, nil},
		{"lines, CRLF and blank", "a\r\n\nbc\n", 10, []line{{"a", 1, false}, {"", 2, false}, {"bc", 3, false}}},
		{"no final newline", "a\nb", 10, []line{{"a", 1, false}, {"b", 2, false}}},
		{"byte order mark on the first line only", "\xef\xbb\xbfa\n\xef\xbb\xbfb\n", 10, []line{{"a", 1, false}, {"\xef\xbb\xbfb", 2, false}}},
		{"line of exactly the maximum", long + "\nz\n", len(long), []line{{long, 1, false}, {"z", 2, false}}},
		{"CRLF line of exactly the maximum", long + "\r\nz", len(long), []line{{long, 1, false}, {"z", 2, false}}},
		{"line over the maximum is reported, not kept", "a\n" + long + "\nz", len(long) - 1, []line{{"a", 1, false}, {"", 2, true}, {"z", 3, false}}},
		{"last line over the maximum", long, 1000, []line{{"", 1, true}}},
		{"CRLF line over the maximum, then more", "a\r\n" + long + "\r\nz\r\n", 1000, []line{{"a", 1, false}, {"", 2, true}, {"z", 3, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := read(strings.NewReader(tc.in), tc.max)
			if err != io.EOF {
				t.Errorf("ended with %v; want io.EOF", err)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d lines; want %d", len(got), len(tc.want))
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d = %.20q #%d tooLong=%v; want %.20q #%d tooLong=%v", i, got[i].text, got[i].n, got[i].tooLong, tc.want[i].text, tc.want[i].n, tc.want[i].tooLong)
				}
			}
		})
	}
}

// TestReaderError: a line read before the input fails comes first; the
// error follows, and stays.
func TestReaderError(t *testing.T) {
	broken := errors.New("broken pipe")
	lr := New(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(broken)), 10)
	for i, want := range []string{"a", "b"} {
		if b, n, ok, _, err := lr.Next(); !ok || err != nil || string(b) != want || n != int64(i+1) {
			t.Fatalf("Next = %q #%d, %v, %v; want %q", b, n, ok, err, want)
		}
	}
	for range 2 {
		if _, n, ok, _, err := lr.Next(); ok || !errors.Is(err, broken) || n != 2 {
			t.Fatalf("Next after the failure = #%d, %v, %v; want the input's error", n, ok, err)
		}
	}
}

// endless is a line that never ends.
type endless struct{ read int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestReaderEndlessLine: a line without end is reported as soon as it
// passes the maximum, after reading about that much, not never (a reader of
// a stream that is not what it expects must be able to stop).
func TestReaderEndlessLine(t *testing.T) {
	const max = 1 << 20
	in := &endless{}
	lr := New(in, max)
	b, n, ok, tooLong, err := lr.Next()
	if !ok || !tooLong || b != nil || n != 1 || err != nil {
		t.Fatalf("Next = %.20q #%d ok=%v tooLong=%v %v; want line 1 reported too long", b, n, ok, tooLong, err)
	}
	if in.read > 2*max {
		t.Fatalf("read %d bytes to find a line over %d too long", in.read, max)
	}
}
