// Package migrations holds quotad's SQL schema as golang-migrate files
// (NNNNNN_verb_noun.up.sql / .down.sql), embedded so that the binary and the
// tests apply exactly the same statements.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
