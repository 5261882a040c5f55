package connstr

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// Every form of password libpq and pgx accept is masked where it stands,
// and nothing else is: the rest of the string still says which server,
// user and database it names.
func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		secrets  []string // what must not survive
	}{
		// URLs.
		{"postgres://app:hunter2@db.internal/app", "postgres://app:xxxxx@db.internal/app", nil},
		{"postgresql://app:hunter2@db.internal:5433/app?sslmode=disable", "postgresql://app:xxxxx@db.internal:5433/app?sslmode=disable", nil},
		{"postgres://:hunter2@db/app", "postgres://:xxxxx@db/app", nil},
		{"postgres://app:hun:ter2@db/app", "postgres://app:xxxxx@db/app", []string{"hun", "ter2"}},
		{"postgres://app:hunter%32@db/app", "postgres://app:xxxxx@db/app", []string{"hunter%32"}},
		{"postgres://app@/app?host=/run/pg&password=hunter2", "postgres://app@/app?host=/run/pg&password=xxxxx", nil},
		{"postgres://app@/app?password=first&password=hunter2", "postgres://app@/app?password=xxxxx&password=xxxxx", []string{"first"}},
		{"postgres://app@/app?pass%77ord=hunter2", "postgres://app@/app?pass%77ord=xxxxx", nil},
		{"postgres://app@/app?%20password%20=hunter2", "postgres://app@/app?%20password%20=xxxxx", nil},
		{"postgres://app@/app? password =hunter2", "postgres://app@/app? password =xxxxx", nil},
		{"postgres://app@/app?password=hunter%32", "postgres://app@/app?password=xxxxx", []string{"hunter%32"}},
		{"postgres://app@/app?sslpassword=hunter2&sslkey=/k", "postgres://app@/app?sslpassword=xxxxx&sslkey=/k", nil},
		{"postgres://app@/app?PASSWORD=hunter2", "postgres://app@/app?PASSWORD=xxxxx", nil},
		{"postgres://app:hunter2@h1:5432,h2:5433/app", "postgres://app:xxxxx@h1:5432,h2:5433/app", nil},
		{"postgres://app:hunter2@[::1]:5432/app?password=hunter2", "postgres://app:xxxxx@[::1]:5432/app?password=xxxxx", nil},
		// A password equal to another part: its place is masked, the other
		// part stays.
		{"postgres://app:app@db/app?application_name=app", "postgres://app:xxxxx@db/app?application_name=app", nil},
		{"postgres://app@db/app?application_name=hunter2&password=hunter2", "postgres://app@db/app?application_name=hunter2&password=xxxxx", nil},
		// An '@' in a parameter's value is data.
		{"postgres://app:hunter2@db/app?application_name=me@home", "postgres://app:xxxxx@db/app?application_name=me@home", nil},
		// Unencoded '/', '?' or '@' in a password leave its place in doubt:
		// everything up to the last '@' is masked.
		{"postgres://app:hun/ter2@db/app", "postgres://xxxxx@db/app", []string{"hun", "ter2"}},
		{"postgres://app:hun/ter?2@db/app", "postgres://xxxxx@db/app", []string{"hun", "ter"}},
		{"postgres://app:hunter2@x@db/app", "postgres://app:xxxxx@xxxxx@db/app", nil},
		{"postgres://app@db:hun:ter2@h/app", "postgres://app@xxxxx@h/app", []string{"hun", "ter2"}},
		{"postgres://app@db:hunter2/app", "postgres://app@db:hunter2/app", nil}, // a bad port, no '@': nothing to take for a password
		// Keyword/value strings.
		{"host=db user=app password=hunter2 dbname=app", "host=db user=app password=xxxxx dbname=app", nil},
		{"password=hunter2", "password=xxxxx", nil},
		{"host=db password='hun ter2' dbname=app", "host=db password=xxxxx dbname=app", []string{"hun", "ter2"}},
		{"host=db password = 'hun ter2' port=5432", "host=db password = xxxxx port=5432", []string{"hun", "ter2"}},
		{"host=db password=hunter2   dbname=app", "host=db password=xxxxx   dbname=app", nil},
		{`host=db password='hun\'ter2' dbname=app`, "host=db password=xxxxx dbname=app", []string{"hun", "ter2"}},
		{`host=db password=hun\ ter2 dbname=app`, "host=db password=xxxxx dbname=app", []string{"hun", "ter2"}},
		{"host=db password='hunter2 dbname=app", "host=db password=xxxxx", nil},
		{"host=db sslpassword=hunter2", "host=db sslpassword=xxxxx", nil},
		{"user=hunter2 password=hunter2", "user=hunter2 password=xxxxx", nil},
		{"oops password=hunter2 host=db", "oops password=xxxxx host=db", nil},
		{"host=db\tpassword=hunter2\n", "host=db\tpassword=xxxxx\n", nil},
		{"=x password=hunter2", "=x password=xxxxx", nil},
		// File paths have no password.
		{"/data/app.db", "/data/app.db", nil},
		{"/data/pass=word.db", "/data/pass=word.db", nil},
		{"my dir/app.db", "my dir/app.db", nil},
		{"", "", nil},
	} {
		got := Redact(tc.in)
		if got != tc.want {
			t.Errorf("Redact(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
		for _, s := range append(tc.secrets, "hunter2") {
			if strings.Count(got, s) > strings.Count(tc.want, s) {
				t.Errorf("Redact(%q) = %q: %q shows", tc.in, got, s)
			}
		}
	}
}

// What pgx takes for a password, Redact masks: for each connection string
// whose password pgx parses, the masked one parses to the same settings
// but the password.
func TestRedactAgreesWithPgx(t *testing.T) {
	for _, conn := range []string{
		"postgres://app:hunter2@db/app",
		"postgres://app:hun:ter2@db/app",
		"postgres://app:hunter%32@db/app",
		"postgres://app@db/app?password=first&password=hunter2",
		"postgres://app@db/app?pass%77ord=hunter2",
		"postgres://app@db/app?host=db& password =hunter2",
		"postgres://app:hunter2@h1:5432,h2:5433/app?application_name=me@home",
		"host=db user=app password=hunter2 dbname=app",
		"host=db password = 'hun ter2' dbname=app",
		`host=db password='hun\'ter2' dbname=app`,
		`host=db password=hun\ ter2 dbname=app`,
	} {
		cfg, err := pgconn.ParseConfig(conn)
		if err != nil {
			t.Fatalf("pgx cannot parse %q: %v", conn, err)
		}
		if cfg.Password == "" {
			t.Fatalf("pgx finds no password in %q", conn)
		}
		masked, err := pgconn.ParseConfig(Redact(conn))
		if err != nil {
			t.Fatalf("pgx cannot parse Redact(%q) = %q: %v", conn, Redact(conn), err)
		}
		if masked.Password != Mask {
			t.Errorf("Redact(%q) = %q: pgx reads the password %q", conn, Redact(conn), masked.Password)
		}
		if masked.Host != cfg.Host || masked.Port != cfg.Port || masked.User != cfg.User || masked.Database != cfg.Database {
			t.Errorf("Redact(%q) = %q names another server, user or database", conn, Redact(conn))
		}
	}
}
