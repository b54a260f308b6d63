package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/quotad/quotad/migrations"
)

// SchemaVersion is the newest migration this binary carries, and
// BaselineVersion the oldest: the baseline, which makes the whole schema
// of its version from nothing (see migrations/000027_baseline.up.sql).
var SchemaVersion, BaselineVersion = func() (uint, uint) {
	entries, err := fs.ReadDir(migrations.FS, ".")
	if err != nil {
		panic(err)
	}
	var newest, oldest uint
	for _, e := range entries {
		n, _, ok := strings.Cut(e.Name(), "_")
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(n, 10, 32)
		if err != nil {
			continue
		}
		newest = max(newest, uint(v))
		if oldest == 0 || uint(v) < oldest {
			oldest = uint(v)
		}
	}
	return newest, oldest
}()

// BeforeBaseline is the last commit whose quotad carries the migrations
// from 1 that the baseline replaced: what migrates a database at an older
// version than the baseline's up to it.
const BeforeBaseline = "f20431546194"

// PredatesBaseline reports whether a schema at version v was made by the
// migrations the baseline replaced, and is not at the baseline's version
// yet: this binary has no migration from it (0 is no schema at all, which
// the baseline makes).
func PredatesBaseline(v uint) bool { return v > 0 && v < BaselineVersion }

// Migrations applies the embedded migrations to a DB's schema and reads
// where the schema is: golang-migrate over the DB's pool.
type Migrations struct{ db *DB }

// Migrations returns db's migrations.
func (db *DB) Migrations() Migrations { return Migrations{db: db} }

// MigrationState is where the schema is (see Migrations.Version).
type MigrationState struct {
	Version uint
	Dirty   bool
}

// ErrDirty is returned by Migrations.Up when the schema is dirty: a migration
// failed or was interrupted (see MigrationState).
var ErrDirty = errors.New("the schema is dirty")

// ErrPredatesBaseline is returned by Migrations.Up and Down for a schema
// whose version predates the baseline (see PredatesBaseline), where
// golang-migrate would only say that it finds no migration of that version.
var ErrPredatesBaseline = errors.New("the schema predates the migrations' baseline")

// refusePredating returns ErrPredatesBaseline for a schema that predates
// the baseline, or nil.
func (ms Migrations) refusePredating(ctx context.Context) error {
	st, err := ms.Version(ctx)
	if err != nil {
		return err
	}
	if PredatesBaseline(st.Version) {
		return fmt.Errorf("%w: it is at version %d, the baseline is %d", ErrPredatesBaseline, st.Version, BaselineVersion)
	}
	return nil
}

// migrator returns a golang-migrate instance over the pool's schema, with
// its database driver, whose lock is the migrations' (a PostgreSQL advisory
// lock of the database, the schema and the migrations' table). Call the
// func returned after use.
func (ms Migrations) migrator() (*migrate.Migrate, database.Driver, func(), error) {
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open migrations: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(ms.db.pool)
	driver, err := migratepgx.WithInstance(sqlDB, &migratepgx.Config{})
	if err != nil {
		sqlDB.Close()
		return nil, nil, nil, fmt.Errorf("open migration driver: %w", mapErr(err))
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", driver)
	if err != nil {
		sqlDB.Close()
		return nil, nil, nil, fmt.Errorf("create migrator: %w", err)
	}
	return m, driver, func() { m.Close() }, nil
}

// Wait returns once no other process is migrating the schema:
// it takes the migrations' lock, as a migration does, and releases it.
// Like a migration, it waits for the lock without a deadline.
func (ms Migrations) Wait(ctx context.Context) error {
	_, driver, done, err := ms.migrator()
	if err != nil {
		return err
	}
	defer done()
	if err := driver.Lock(); err != nil {
		return fmt.Errorf("wait for migrations: %w", mapErr(err))
	}
	if err := driver.Unlock(); err != nil {
		return fmt.Errorf("wait for migrations: %w", mapErr(err))
	}
	return nil
}

// Up applies every migration not yet applied.
func (ms Migrations) Up(ctx context.Context) error {
	if err := ms.refusePredating(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	m, _, done, err := ms.migrator()
	if err != nil {
		return err
	}
	defer done()
	stop := context.AfterFunc(ctx, func() { m.GracefulStop <- true })
	defer stop()
	var dirty migrate.ErrDirty
	if err := m.Up(); errors.As(err, &dirty) {
		return fmt.Errorf("migrate up: %w at version %d", ErrDirty, dirty.Version)
	} else if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// Down reverts the newest applied migration. The baseline's down drops
// the whole schema, with every row in it.
func (ms Migrations) Down(ctx context.Context) error {
	if err := ms.refusePredating(ctx); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	m, _, done, err := ms.migrator()
	if err != nil {
		return err
	}
	defer done()
	if err := m.Steps(-1); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Force records the schema as being at version v (0: no migration
// applied), not dirty, without running any migration: what an operator
// does once a migration that failed halfway is understood (see
// MigrationState.Dirty).
func (ms Migrations) Force(ctx context.Context, v uint) error {
	m, _, done, err := ms.migrator()
	if err != nil {
		return err
	}
	defer done()
	target := int(v)
	if v == 0 {
		target = -1 // golang-migrate's "no version"
	}
	if err := m.Force(target); err != nil {
		return fmt.Errorf("migrate force: %w", err)
	}
	return nil
}

// Version reads the schema version applied to the database; version
// 0 means none.
func (ms Migrations) Version(ctx context.Context) (MigrationState, error) {
	// Read the table golang-migrate keeps directly: it is one cheap query,
	// and /readyz calls this often.
	const q = `SELECT version, dirty FROM schema_migrations LIMIT 1`
	var (
		v     int64
		dirty bool
	)
	err := ms.db.pool.QueryRow(ctx, q).Scan(&v, &dirty)
	switch {
	case isCode(err, "42P01"): // undefined_table: never migrated
		return MigrationState{}, nil
	case errors.Is(err, pgx.ErrNoRows):
		return MigrationState{}, nil
	case err != nil:
		return MigrationState{}, mapErr(err)
	}
	if v < 0 {
		// golang-migrate's "no version", left dirty by a failed revert
		// of the first migration.
		v = 0
	}
	return MigrationState{Version: uint(v), Dirty: dirty}, nil
}
