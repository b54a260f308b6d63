package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/quotad/quotad/internal/store"
)

// The schema quotad starts on. A binary carries the migrations up to
// store.SchemaVersion and runs only on a schema at that version, not
// dirty: it migrates an older one at start-up (--migrate, the default),
// and refuses to start on any other, with a sentence that says why and
// what to do. A process already running goes on serving when a newer
// quotad migrates the schema under it (a rolling upgrade), as /readyz
// does (see checkSchema): whether that is safe for a given version is
// what docs/operations.md's table says.

// schemaError is a refusal: one sentence.
type schemaError struct{ sentence string }

func (e *schemaError) Error() string { return e.sentence }

// schemaNewer is the refusal of a schema newer than this binary carries.
func schemaNewer(v uint) error {
	return &schemaError{fmt.Sprintf("the database schema is at version %d, newer than this quotad (%s), which carries schema %d: "+
		"run a quotad that carries schema %d or later (quotad version prints the schema a binary carries), "+
		"or first roll the schema back to %d with the newer quotad's `quotad migrate down`, once per version above %d "+
		"(see \"Upgrading and rolling back\" in docs/operations.md)",
		v, version, store.SchemaVersion, v, store.SchemaVersion, store.SchemaVersion)}
}

// schemaPredates is the refusal of a schema older than this binary's
// baseline (see store.PredatesBaseline): this binary carries no migration
// from it, an older quotad does.
func schemaPredates(v uint) error {
	return &schemaError{fmt.Sprintf("the database schema is at version %d, older than this quotad (%s) can migrate: schema %d predates the baseline %d: "+
		"migrate it to %d with a quotad built before the baseline (commit %s) first, with its `quotad migrate up`, then start this one "+
		"(see \"Upgrading and rolling back\" in docs/operations.md)",
		v, version, v, store.BaselineVersion, store.BaselineVersion, store.BeforeBaseline)}
}

// schemaDirty is the refusal of a schema a migration left dirty.
func schemaDirty(v uint) error {
	return &schemaError{fmt.Sprintf("the database schema is dirty at version %d: a migration to version %d failed or was interrupted, "+
		"and as each migration runs in one transaction the schema is still at the version before it (%d when migrating up, %d when migrating down): "+
		"once the migration's error is understood, record that version with `quotad migrate force VERSION` and start again",
		v, v, prevVersion(v), v+1)}
}

// schemaOlder is the refusal of a schema older than this binary's, when
// it is not to migrate it: noMigrate says what turned migrations off
// (see config.noMigrate).
func schemaOlder(v uint, noMigrate string) error {
	return &schemaError{fmt.Sprintf("the database schema is at version %d, older than this quotad (%s), which needs schema %d, and %s: "+
		"run `quotad migrate up` with this quotad first (or start it without --no-migrate)",
		v, version, store.SchemaVersion, noMigrate)}
}

// prevVersion is the version before v's migration: none (0) before the
// baseline, which makes the schema from nothing.
func prevVersion(v uint) uint {
	if v <= store.BaselineVersion {
		return 0
	}
	return v - 1
}

// refuseSchema returns the refusal of st for a binary that may migrate it
// up (noMigrate empty) or may not (noMigrate says why), or nil: a schema
// that predates the baseline (dirty or not: only an older quotad can tell
// what to do with it), is dirty, is newer than store.SchemaVersion, or is
// older and not to be migrated.
func refuseSchema(st store.MigrationState, noMigrate string) error {
	switch {
	case store.PredatesBaseline(st.Version):
		return schemaPredates(st.Version)
	case st.Dirty:
		return schemaDirty(st.Version)
	case st.Version > store.SchemaVersion:
		return schemaNewer(st.Version)
	case st.Version < store.SchemaVersion && noMigrate != "":
		return schemaOlder(st.Version, noMigrate)
	}
	return nil
}

// startSchema makes db's schema the one this binary runs on, or says why
// it cannot. A schema older than the binary's, or dirty, may be another
// process's migration under way (golang-migrate marks each migration dirty
// while it runs): startSchema migrates it up unless noMigrate says why not
// (see refuseSchema), which waits for that process's lock
// (golang-migrate's advisory lock), or else waits for
// the lock alone; either way it then reads the schema again and refuses
// one it cannot run on. Of several processes migrating at once, one
// migrates and the others find nothing left to do.
func startSchema(ctx context.Context, db *store.DB, noMigrate string) error {
	migrate := noMigrate == ""
	st, err := db.Migrations().Version(ctx)
	if err != nil {
		return fmt.Errorf("read the schema version: %w", err)
	}
	var migErr error
	if st.Dirty || st.Version < store.SchemaVersion {
		if migrate {
			migErr = db.Migrations().Up(ctx)
		} else {
			migErr = db.Migrations().Wait(ctx)
		}
		if st, err = db.Migrations().Version(ctx); err != nil {
			return errors.Join(migErr, fmt.Errorf("read the schema version: %w", err))
		}
	}
	if r := refuseSchema(st, noMigrate); r != nil {
		// The refusal says what the migration's error would (a dirty
		// schema; a schema older than the baseline; no migration found for
		// a newer version), not why a migration this process ran failed:
		// that is worth reading.
		if migErr != nil && !errors.Is(migErr, store.ErrDirty) && !errors.Is(migErr, store.ErrPredatesBaseline) &&
			st.Version <= store.SchemaVersion {
			return fmt.Errorf("%w; %v", r, migErr)
		}
		return r
	}
	return migErr
}
