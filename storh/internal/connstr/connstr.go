// Package connstr masks the passwords of PostgreSQL connection strings,
// for messages. It reads them as libpq (and pgx, which follows it) does,
// so that it finds every place a password can be: a URL's user
// information and its password and sslpassword parameters (repeated, and
// with percent-encoded names), and the password and sslpassword keywords
// of a keyword/value string (quoted or not, with spaces around the '=').
// It masks positions, not text: a password equal to the user name leaves
// the user name as it is. Where a malformed URL leaves a password's place
// in doubt, it masks everything that might be one.
//
// It imports no driver, so storh masks what a user passes in the same way
// whether or not the program imports the PostgreSQL backend.
package connstr

import "strings"

// Mask replaces a password.
const Mask = "xxxxx"

// Redact returns s with every password masked: s is a connection URL
// (postgres://, postgresql://, or another backend's, read the same way), a keyword/value connection string, or a
// file path, which has none and comes back as it is (a path that holds
// "password=" after a space or at its start is taken for a keyword).
func Redact(s string) string {
	if scheme, ok := Scheme(s); ok {
		return scheme + "://" + redactURL(s[len(scheme)+len("://"):])
	}
	return redactKeywords(s)
}

// Scheme returns the scheme of path if path is a URL (a scheme of a
// letter then letters, digits, '+', '-' or '.', before "://"), so that a
// file path is never taken for one: it cannot start so unless it names a
// directory "x:" relative to the working one.
func Scheme(path string) (string, bool) {
	i := strings.Index(path, "://")
	if i <= 0 {
		return "", false
	}
	for j, c := range path[:i] {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (j == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return "", false
		}
	}
	return path[:i], true
}

// secret reports whether a parameter, as written (percent-encoded in a
// URL), names a password. Case is ignored: a misspelt key is a secret too.
func secret(key string, encoded bool) bool {
	if encoded {
		key = percentDecode(key)
	}
	key = strings.ToLower(strings.Trim(key, " "))
	return key == "password" || key == "sslpassword"
}

// redactURL masks the passwords of a URL after its scheme. libpq looks
// for the user information up to the first '@' or '/', whichever comes
// first: the password is what follows the first ':' before that '@'.
func redactURL(p string) string {
	var b strings.Builder
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		user, _, hasPassword := strings.Cut(p[:i], ":")
		b.WriteString(user)
		if hasPassword {
			b.WriteString(":" + Mask)
		}
		b.WriteByte('@')
		p = p[i+1:]
	}
	q := queryStart(p)
	if !wellFormed(p, q) {
		// A password with a '/' or '?' in it, written without encoding,
		// moves its '@' past where libpq looks: everything up to the last
		// '@' may be a password.
		if at := strings.LastIndexByte(p, '@'); at >= 0 {
			p = Mask + p[at:]
			q = queryStart(p)
		}
	}
	if q < 0 {
		b.WriteString(p)
		return b.String()
	}
	b.WriteString(p[:q+1])
	for i, pair := range strings.Split(p[q+1:], "&") {
		if i > 0 {
			b.WriteByte('&')
		}
		key, _, hasValue := strings.Cut(pair, "=")
		if hasValue && secret(key, true) {
			b.WriteString(key + "=" + Mask)
			continue
		}
		b.WriteString(pair)
	}
	return b.String()
}

// queryStart returns the index of the '?' that starts p's query (p after
// the user information), or -1: the first '?' not inside the brackets of
// an IPv6 host.
func queryStart(p string) int {
	i := 0
	for {
		if i < len(p) && p[i] == '[' {
			end := strings.IndexByte(p[i:], ']')
			if end < 0 {
				return strings.IndexByte(p, '?')
			}
			i += end + 1
		}
		for i < len(p) && p[i] != '/' && p[i] != '?' && p[i] != ',' {
			i++
		}
		if i < len(p) && p[i] == ',' {
			i++
			continue
		}
		if j := strings.IndexByte(p[i:], '?'); j >= 0 {
			return i + j
		}
		return -1
	}
}

// wellFormed reports whether p (after the user information, its query at
// q) leaves no doubt where a password could be: no '@' before the query,
// hosts' ports made of digits (a non-numeric "port" may be a password cut
// at its ':'), and query parameters of one '=' each.
func wellFormed(p string, q int) bool {
	hosts, query := p, ""
	if q >= 0 {
		hosts, query = p[:q], p[q+1:]
	}
	if strings.IndexByte(hosts, '@') >= 0 {
		return false
	}
	if i := strings.IndexByte(hosts, '/'); i >= 0 {
		hosts = hosts[:i]
	}
	for _, h := range strings.Split(hosts, ",") {
		if strings.HasPrefix(h, "[") {
			end := strings.IndexByte(h, ']')
			if end < 0 {
				return false
			}
			h = h[end+1:]
		}
		if _, port, found := strings.Cut(h, ":"); found && strings.Trim(port, "0123456789 ") != "" {
			return false
		}
	}
	if query != "" {
		for _, pair := range strings.Split(query, "&") {
			if strings.Count(pair, "=") != 1 {
				return false
			}
		}
	}
	return true
}

// percentDecode decodes %XX escapes, leaving a malformed one as it is.
func percentDecode(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// redactKeywords masks the password values of a keyword/value string, read
// as libpq does: keyword, optional spaces, '=', optional spaces, then a
// value that is either quoted ('…', with backslash escapes, up to the
// closing quote or the end) or runs to the next space (with backslash
// escapes). A word without an '=' (a path with spaces, a typo) is passed
// over, and reading goes on after it.
func redactKeywords(s string) string {
	var b strings.Builder
	i := 0
	for i < len(s) {
		start := i
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		keyStart := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[keyStart:i]
		eq := i
		for eq < len(s) && isSpace(s[eq]) {
			eq++
		}
		if eq == len(s) || s[eq] != '=' || key == "" {
			b.WriteString(s[start:i])
			if i == keyStart {
				// An '=' with no keyword before it: pass it over.
				b.WriteString(s[i:min(i+1, len(s))])
				i = min(i+1, len(s))
			}
			continue
		}
		v := eq + 1
		for v < len(s) && isSpace(s[v]) {
			v++
		}
		end := valueEnd(s, v)
		b.WriteString(s[start:v])
		if secret(key, false) {
			b.WriteString(Mask)
		} else {
			b.WriteString(s[v:end])
		}
		i = end
	}
	return b.String()
}

// valueEnd returns where the value that starts at v ends.
func valueEnd(s string, v int) int {
	if v < len(s) && s[v] == '\'' {
		for i := v + 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				return i + 1
			}
		}
		return len(s)
	}
	i := v
	for i < len(s) && !isSpace(s[i]) {
		if s[i] == '\\' {
			i++
		}
		i++
	}
	return min(i, len(s))
}
