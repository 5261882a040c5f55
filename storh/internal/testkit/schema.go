package testkit

// BenchSchema is the JSON Schema of the schema benchmarks: ten rules over
// the fields of a benchmark record (user, email, age, score, active,
// country, tags, created), every one of which a record is checked against.
// The storh package's write benchmark and the engine's validation
// benchmark measure the same rules.
var BenchSchema = []byte(`{
	"type": "object",
	"required": ["user", "email", "age", "created"],
	"properties": {
		"user": {"type": "string", "pattern": "^user-[0-9]+$"},
		"email": {"type": "string", "maxLength": 64},
		"age": {"type": "integer", "minimum": 0, "maximum": 150},
		"score": {"type": "number"},
		"active": {"type": "boolean"},
		"country": {"enum": ["NL", "DE", "FR"]},
		"tags": {"type": "array", "items": {"type": "string"}, "maxItems": 10},
		"created": {"type": "string", "format": "date-time"}
	}
}`)
