package postgres

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"
)

// TestByteaArrayEncoding: the bytea[] argument of buffered writes encodes
// to the bytes pgx makes of the same [][]byte, in both formats, a nil
// element as a NULL and an empty one as an empty value, and without an
// allocation per element (pgx's [][]byte went through reflect, two per
// row written).
func TestByteaArrayEncoding(t *testing.T) {
	m := pgtype.NewMap()
	rows := make([][]byte, 100)
	for i := range rows {
		rows[i] = bytes.Repeat([]byte{byte(i)}, 1+i%40)
	}
	cases := map[string][][]byte{
		"rows":           rows,
		"null and empty": {[]byte("a"), nil, {}, []byte("\x00\xff")},
		"one":            {[]byte("k")},
	}
	for name, elems := range cases {
		for _, format := range []int16{pgtype.BinaryFormatCode, pgtype.TextFormatCode} {
			want, err := m.Encode(pgtype.ByteaArrayOID, format, elems, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Encode(pgtype.ByteaArrayOID, format, byteaArray(elems), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s, format %d: encoded as %q, pgx encodes [][]byte as %q", name, format, got, want)
			}
		}
	}
	buf := make([]byte, 0, 64<<10)
	arg := any(byteaArray(rows))
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := m.Encode(pgtype.ByteaArrayOID, pgtype.BinaryFormatCode, arg, buf[:0]); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("encoding %d rows: %v allocations, want at most 2", len(rows), allocs)
	}
}
