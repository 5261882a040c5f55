package bench

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// The generated part of TestDriverAgreementMongoImport: random documents of
// every BSON type the import maps, written with bson.MarshalExtJSON (the
// writer mongoexport uses) so that the import sees the exact forms a real
// export has. The seed is fixed so that CI is repeatable; set
// STORH_AGREE_SEED to explore others:
//
//	STORH_AGREE_SEED=$RANDOM go test -run '^TestDriverAgreementMongoImport$/generated' -v
//
// Left out on purpose: MinKey, MaxKey and DBPointer (the import refuses
// them; the corpus and probes cover that), CodeWithScope (covered by a
// probe) and repeated keys (the corpus covers them; one would stop the
// import of the whole file). Keys never are wrapper names such as "$date": a
// one-key document {"$date": …} reads back as a date in storh and in
// MongoDB alike (docs/bulk-data.md, Caveats).

func mongoSeed(t *testing.T) uint64 {
	seed := uint64(1)
	if s := os.Getenv("STORH_AGREE_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("STORH_AGREE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("generated documents: seed %d (STORH_AGREE_SEED)", seed)
	return seed
}

// generateDocs returns n documents; nine in ten have an ObjectID _id, the
// rest a string _id.
func generateDocs(seed uint64, n int) []bson.D {
	g := &docGen{r: rand.New(rand.NewPCG(seed, 0x5707))}
	docs := make([]bson.D, n)
	for i := range docs {
		var id any
		if g.r.IntN(10) == 0 {
			id = fmt.Sprintf("doc-%d", i)
		} else {
			id = g.objectID()
		}
		d := bson.D{{Key: "_id", Value: id}}
		docs[i] = append(d, g.doc(0)...)
	}
	return docs
}

type docGen struct {
	r *rand.Rand
}

var genKeys = []string{
	"a", "b", "name", "n", "x", "value", "list", "nested", "_id", "_oid", "", " ", "a.b",
	"$notawrapper", "$", "ключ", "😀", "with \"quote\"", "back\\slash", "tab\t", "id", "data", "time",
}

var genStrings = []string{
	"", "plain", "quote \" backslash \\ slash /", "newline \n tab \t cr \r", "nul \x00 end",
	"é ü ß", "😀 emoji", "\u2028\u2029", "<&> html", "\x01\x1f controls", "{\"$date\":\"not a date\"}",
	"5e0be232153bcf7c10df5e93", "2024-05-01T12:00:00Z", "NaN", "Infinity", "true", "null", "0",
}

var genFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 2, 0.1, 1.5, 1e21, 1e-7, 1e300, -1e-300, 5e-324,
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1), math.Inf(-1),
	float64(1 << 53), float64(1<<53 + 2), 9007199254740993, 123456789012345678901234567890.0,
}

var genDecimals = []string{
	"0", "-0", "0.0", "19.990", "1E+3", "1e-3", "NaN", "Infinity", "-Infinity", "1234567890123456789012345678901234",
	"9.999999999999999999999999999999999E+6144", "1E-6176", "-1.5", "0.000001", "100",
}

var genRegexOptions = []string{"", "i", "im", "imsux", "m", "s", "u", "x", "ix"}

func (g *docGen) objectID() bson.ObjectID {
	var id bson.ObjectID
	for i := range id {
		id[i] = byte(g.r.IntN(256))
	}
	return id
}

func (g *docGen) doc(depth int) bson.D {
	n := g.r.IntN(7)
	d := make(bson.D, 0, n+1)
	for _, i := range g.r.Perm(len(genKeys))[:n] {
		k := genKeys[i]
		if depth == 0 && (k == "_id" || k == "_oid") {
			continue // the top-level _id is set by generateDocs, and _oid is taken by the import
		}
		d = append(d, bson.E{Key: k, Value: g.value(depth + 1)})
	}
	return d
}

func (g *docGen) value(depth int) any {
	kinds := 21
	if depth >= 4 {
		kinds = 19 // no more nesting
	}
	switch g.r.IntN(kinds) {
	case 0:
		return genStrings[g.r.IntN(len(genStrings))]
	case 1:
		runes := make([]rune, g.r.IntN(12))
		for i := range runes {
			runes[i] = rune(g.r.IntN(0x10000))
			if runes[i] >= 0xd800 && runes[i] < 0xe000 { // surrogates are not valid UTF-8
				runes[i] = 'x'
			}
		}
		return string(runes)
	case 2:
		return []int32{0, 1, -1, math.MaxInt32, math.MinInt32}[g.r.IntN(5)]
	case 3:
		return int32(g.r.Uint32())
	case 4:
		return []int64{0, math.MaxInt64, math.MinInt64, 1 << 31, -1<<31 - 1, 1 << 53}[g.r.IntN(6)]
	case 5:
		return int64(g.r.Uint64())
	case 6:
		return genFloats[g.r.IntN(len(genFloats))]
	case 7:
		f := math.Float64frombits(g.r.Uint64())
		if g.r.IntN(2) == 0 {
			f = g.r.NormFloat64() * math.Pow(10, float64(g.r.IntN(40)-20))
		}
		return f
	case 8:
		return g.r.IntN(2) == 0
	case 9:
		return nil
	case 10:
		return g.objectID()
	case 11:
		var ms int64
		switch g.r.IntN(4) {
		case 0: // the usual range
			ms = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() + g.r.Int64N(1e12)
		case 1: // before 1970, relaxed writes $numberLong
			ms = -g.r.Int64N(1e13)
		case 2: // beyond 9999 and before year 0
			ms = []int64{253402300800000, -62167219200001, 316516204800000, -62198755200000}[g.r.IntN(4)]
		default:
			ms = g.r.Int64N(1e15) - 5e14
		}
		return bson.DateTime(ms)
	case 12:
		data := make([]byte, g.r.IntN(40))
		for i := range data {
			data[i] = byte(g.r.IntN(256))
		}
		sub := []byte{bson.TypeBinaryGeneric, bson.TypeBinaryUUIDOld, bson.TypeBinaryUUID, bson.TypeBinaryMD5, bson.TypeBinaryUserDefined}[g.r.IntN(5)]
		if (sub == bson.TypeBinaryUUID || sub == bson.TypeBinaryUUIDOld) && g.r.IntN(4) != 0 {
			data = append(data[:0], make([]byte, 16)...)
			for i := range data {
				data[i] = byte(g.r.IntN(256))
			}
		}
		return bson.Binary{Subtype: sub, Data: data}
	case 13:
		s := genDecimals[g.r.IntN(len(genDecimals))]
		if g.r.IntN(2) == 0 {
			s = fmt.Sprintf("%d.%dE%d", g.r.Int64N(1e15)-5e14, g.r.IntN(1000), g.r.IntN(200)-100)
		}
		d, err := bson.ParseDecimal128(s)
		if err != nil {
			panic(fmt.Sprintf("ParseDecimal128(%q): %v", s, err))
		}
		return d
	case 14:
		return bson.Timestamp{T: g.r.Uint32(), I: g.r.Uint32()}
	case 15:
		return bson.Regex{Pattern: genStrings[g.r.IntN(len(genStrings))], Options: genRegexOptions[g.r.IntN(len(genRegexOptions))]}
	case 16:
		return bson.Symbol(genStrings[g.r.IntN(len(genStrings))])
	case 17:
		return bson.JavaScript("function() { return " + strconv.Itoa(g.r.IntN(100)) + "; }")
	case 18:
		return bson.Undefined{}
	case 19:
		return g.doc(depth)
	default:
		a := make(bson.A, g.r.IntN(5))
		for i := range a {
			a[i] = g.value(depth + 1)
		}
		return a
	}
}
