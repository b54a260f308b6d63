package store

// MigrateTo migrates the schema up or down to version v.
func (db *DB) MigrateTo(v uint) error {
	m, done, err := db.migrator()
	if err != nil {
		return err
	}
	defer done()
	return m.Migrate(v)
}

// QuietFor is quietFor, for tests.
var QuietFor = quietFor
