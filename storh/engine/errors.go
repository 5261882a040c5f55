package engine

import "strconv"

// quote escapes names for messages: a name with control characters must not
// be able to forge or break a log line.
func quote(s string) string { return strconv.Quote(s) }
