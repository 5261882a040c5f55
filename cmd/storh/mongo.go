package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/storhdb/storh-go/storh/jsonl"
)

// The Mongo migration path is `storh import --mongo COLL FILE`: the row
// decoding (Extended JSON, _id → UUIDv7, _oid) lives in storh/jsonl;
// this file recognises the usual ways a MongoDB export is not what import
// reads, and says how to get the right one.

// shellSyntax are the constructors of mongo shell output (printjson,
// mongoexport --jsonFormat=shell in old versions), which is not JSON.
var shellSyntax = [][]byte{
	[]byte("ObjectId("), []byte("ISODate("), []byte("NumberLong("), []byte("NumberInt("),
	[]byte("NumberDecimal("), []byte("BinData("), []byte("Timestamp("), []byte("UUID("), []byte("new Date("),
}

// importHint adds to a decode error of line what to do about it, when the
// line shows a known mistake. src is the input (a file, or - for stdin),
// for the command that fixes it.
func importHint(line []byte, err error, mongo bool, src string) error {
	trimmed := bytes.TrimSpace(line)
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		return fmt.Errorf("%w (this looks like a JSON array: import reads one object per line; convert it with %s, or leave out --jsonArray in mongoexport)",
			err, jqFix("'.[]'", src))
	case len(trimmed) == 1 && (trimmed[0] == '{' || trimmed[0] == '}'):
		return fmt.Errorf("%w (this looks like pretty-printed JSON: import reads one object per line; convert it with %s, or leave out --pretty in mongoexport)",
			err, jqFix(".", src))
	}
	for _, s := range shellSyntax {
		if bytes.Contains(line, s) {
			return fmt.Errorf("%w (this is mongo shell syntax, such as %s…), not JSON: export with mongoexport, which writes Extended JSON)", err, s)
		}
	}
	if jsonl.InvalidUTF8(err) {
		return utf8Hint(err)
	}
	if !mongo && bytes.Contains(line, []byte(`"$oid"`)) && bytes.Contains(line, []byte(`"_id"`)) {
		return fmt.Errorf("%w (this looks like mongoexport output: add --mongo)", err)
	}
	return err
}

// jqFix is the jq command that turns src into JSON lines.
func jqFix(filter, src string) string {
	if src == "-" || src == "" {
		return "jq -c " + filter
	}
	out := strings.TrimSuffix(src, filepath.Ext(src)) + ".jsonl"
	if out == src {
		out = src + ".lines"
	}
	return fmt.Sprintf("jq -c %s %s > %s", filter, shellQuote(src), shellQuote(out))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+,:=@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// utf8Hint adds to an error about a string that is not UTF-8 how to keep
// it anyway (put and import).
func utf8Hint(err error) error {
	if jsonl.InvalidUTF8(err) {
		return fmt.Errorf("%w (pass --invalid-utf8=binary to store such strings as binary data)", err)
	}
	return err
}

// looksLikeMongo reports a line with an ObjectID _id, as mongoexport writes.
func looksLikeMongo(line []byte) bool {
	return bytes.Contains(line, []byte(`"_id":{"$oid":`)) || bytes.Contains(line, []byte(`"_id": {"$oid":`))
}
