package main

import (
	"bytes"
	"encoding/base64"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/storhdb/storh-go/storh/objectid"
)

var update = flag.Bool("update", false, "rewrite the generated Mongo samples in testdata/mongo")

// The Mongo samples are what mongoexport writes for two collections: users
// in relaxed Extended JSON (mongoexport's default) and orders in canonical
// Extended JSON (--jsonFormat=canonical). They are generated here so they
// stay reproducible, and committed so the scripts read them like any
// export. TestMongoSamples fails when the files and the generator disagree;
// go test -run TestMongoSamples -update rewrites them.
func TestMongoSamples(t *testing.T) {
	for name, content := range map[string][]byte{
		"users.jsonl":  mongoUsers(300),
		"orders.jsonl": mongoOrders(200),
	} {
		path := filepath.Join("testdata", "mongo", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, content, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestMongoSamples -update writes it)", err)
		}
		if !bytes.Equal(have, content) {
			t.Errorf("%s differs from what the generator makes (go test -run TestMongoSamples -update rewrites it)", path)
		}
	}
}

// oidGen makes ObjectIDs as a few application servers would: each with its
// own random value and counter, seconds spread over 2020–2024.
type oidGen struct {
	r        *rand.Rand
	randoms  []uint64
	counters []uint32
	sec      uint32
}

func newOIDGen(r *rand.Rand, start time.Time) *oidGen {
	g := &oidGen{r: r, sec: uint32(start.Unix())}
	for range 3 {
		g.randoms = append(g.randoms, r.Uint64N(objectid.MaxRandom+1))
		g.counters = append(g.counters, r.Uint32N(objectid.MaxCounter+1))
	}
	return g
}

func (g *oidGen) next() string {
	g.sec += uint32(g.r.IntN(400_000)) // a few days apart on average
	i := g.r.IntN(len(g.randoms))
	g.counters[i] = (g.counters[i] + 1) & objectid.MaxCounter
	id, err := objectid.FromParts(g.sec, g.randoms[i], g.counters[i])
	if err != nil {
		panic(err)
	}
	return id.Hex()
}

var (
	firstNames = []string{"Ana", "Bruno", "Chloé", "Dmitri", "Eun-ji", "Farid", "Greta", "Hiro", "Ines", "José", "Kwame", "Lena", "Mateus", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Søren", "Tomás", "Uma", "Vikram", "Wen", "Yara", "Zoë"}
	lastNames  = []string{"Lima", "Okafor", "Müller", "Kowalski", "Tanaka", "O'Brien", "García", "Nguyen", "Svensson", "Haddad", "Rossi", "Chen"}
	cities     = []string{"São Paulo", "Lagos", "Berlin", "Kraków", "Osaka", "Dublin", "Sevilla", "Hà Nội", "Malmö", "Beirut"}
	tagPool    = []string{"admin", "beta", "newsletter", "vip", "trial", "support"}
)

func b64(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// isoMs formats a time as relaxed Extended JSON writes it.
func isoMs(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// mongoUsers writes n users in relaxed Extended JSON v2.
func mongoUsers(n int) []byte {
	r := rand.New(rand.NewPCG(42, 1))
	ids := newOIDGen(r, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	var prev []string
	var b bytes.Buffer
	for i := range n {
		id := ids.next()
		created := objectid.MustParse(id).Timestamp().Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		first, last := firstNames[r.IntN(len(firstNames))], lastNames[r.IntN(len(lastNames))]
		email := strings.ToLower(strings.NewReplacer("'", "", "é", "e", "ø", "o", "ë", "e", "á", "a").Replace(first+"."+last)) + fmt.Sprintf("%d@example.com", i)
		fmt.Fprintf(&b, `{"_id":{"$oid":"%s"},"name":%q,"email":%q,"age":%d,"active":%t`, id, first+" "+last, email, 18+r.IntN(60), r.IntN(5) != 0)
		switch i % 50 {
		case 7:
			b.WriteString(`,"score":{"$numberDouble":"NaN"}`)
		case 19:
			b.WriteString(`,"score":{"$numberDouble":"Infinity"}`)
		default:
			fmt.Fprintf(&b, `,"score":%d.%d`, r.IntN(100), r.IntN(10))
		}
		fmt.Fprintf(&b, `,"ratio":%d.0`, r.IntN(3))
		fmt.Fprintf(&b, `,"balance":{"$numberDecimal":"%d.%02d"}`, r.IntN(100000), r.IntN(100))
		fmt.Fprintf(&b, `,"visits":%d`, r.Int64N(1<<40))
		b.WriteString(`,"tags":[`)
		for k := range r.IntN(4) {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q", tagPool[r.IntN(len(tagPool))])
		}
		b.WriteString(`]`)
		city := cities[r.IntN(len(cities))]
		fmt.Fprintf(&b, `,"address":{"street":"%s %d","city":%q,"geo":{"type":"Point","coordinates":[%.4f,%.4f]}}`,
			[]string{"Main St", "Rua Augusta", "Hauptstraße", "Calle Mayor"}[r.IntN(4)], 1+r.IntN(300), city, r.Float64()*360-180, r.Float64()*180-90)
		fmt.Fprintf(&b, `,"createdAt":{"$date":"%s"}`, isoMs(created))
		birth := time.Date(1945+r.IntN(60), time.Month(1+r.IntN(12)), 1+r.IntN(28), 0, 0, 0, 0, time.UTC)
		if birth.Year() < 1970 {
			fmt.Fprintf(&b, `,"birthday":{"$date":{"$numberLong":"%d"}}`, birth.UnixMilli())
		} else {
			fmt.Fprintf(&b, `,"birthday":{"$date":"%s"}`, isoMs(birth))
		}
		if r.IntN(3) == 0 {
			b.WriteString(`,"lastLogin":null`)
		} else {
			fmt.Fprintf(&b, `,"lastLogin":{"$date":"%s"}`, isoMs(created.Add(time.Duration(r.Int64N(int64(400*24*time.Hour))))))
		}
		fmt.Fprintf(&b, `,"avatar":{"$binary":{"base64":"%s","subType":"00"}}`, b64(r, 8+r.IntN(24)))
		fmt.Fprintf(&b, `,"deviceId":{"$binary":{"base64":"%s","subType":"04"}}`, b64(r, 16))
		b.WriteString(`,"friends":[`)
		for k := range min(len(prev), r.IntN(4)) {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"$oid":"%s"}`, prev[r.IntN(len(prev))])
		}
		b.WriteString(`]`)
		fmt.Fprintf(&b, `,"prefs":{"theme":%q,"notifications":{"email":%t,"push":%t},"limits":{}}`,
			[]string{"dark", "light", "system"}[r.IntN(3)], r.IntN(2) == 0, r.IntN(2) == 0)
		if i%25 == 3 {
			b.WriteString(`,"notes":"said \"hi\"\nthen left\ttab \\ backslash \u00e9 \ud83d\ude00"`)
		}
		if i%60 == 11 {
			b.WriteString(`,"pattern":{"$regularExpression":{"pattern":"^[a-z]+$","options":"i"}}`)
		}
		b.WriteString("}\n")
		prev = append(prev, id)
	}
	return b.Bytes()
}

// mongoOrders writes n orders in canonical Extended JSON v2, as
// mongoexport --jsonFormat=canonical does: every number is wrapped.
func mongoOrders(n int) []byte {
	r := rand.New(rand.NewPCG(42, 2))
	ids := newOIDGen(r, time.Date(2021, 6, 1, 0, 0, 0, 0, time.UTC))
	users := newOIDGen(r, time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	var b bytes.Buffer
	for i := range n {
		id := ids.next()
		placed := objectid.MustParse(id).Timestamp().Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		fmt.Fprintf(&b, `{"_id":{"$oid":"%s"},"user":{"$oid":"%s"},"status":%q,"items":[`, id, users.next(),
			[]string{"placed", "paid", "shipped", "delivered", "cancelled"}[r.IntN(5)])
		total := 0
		for k := range 1 + r.IntN(3) {
			if k > 0 {
				b.WriteByte(',')
			}
			qty, cents := 1+r.IntN(5), 99+r.IntN(20000)
			total += qty * cents
			fmt.Fprintf(&b, `{"sku":"SKU-%04d","qty":{"$numberInt":"%d"},"price":{"$numberDecimal":"%d.%02d"}}`, r.IntN(10000), qty, cents/100, cents%100)
		}
		fmt.Fprintf(&b, `],"total":{"$numberDouble":"%d.%02d"}`, total/100, total%100)
		fmt.Fprintf(&b, `,"weightGrams":{"$numberLong":"%d"}`, r.Int64N(1<<36))
		fmt.Fprintf(&b, `,"discount":{"$numberDouble":"%s"}`, []string{"0.0", "-Infinity", "0.15", "1.0E-3"}[i%4])
		fmt.Fprintf(&b, `,"placedAt":{"$date":{"$numberLong":"%d"}}`, placed.UnixMilli())
		if i%4 == 0 {
			fmt.Fprintf(&b, `,"shippedAt":{"$date":{"$numberLong":"%d"}}`, placed.Add(time.Duration(r.IntN(72))*time.Hour).UnixMilli())
		} else {
			b.WriteString(`,"shippedAt":null`)
		}
		fmt.Fprintf(&b, `,"receipt":{"$binary":{"base64":"%s","subType":"00"}}`, b64(r, 12))
		fmt.Fprintf(&b, `,"audit":{"ts":{"$timestamp":{"t":%d,"i":%d}}}`, placed.Unix(), 1+r.IntN(5))
		b.WriteString("}\n")
	}
	return b.Bytes()
}
