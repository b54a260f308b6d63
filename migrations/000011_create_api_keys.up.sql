-- API keys quotad issues to customers. quotad stores the SHA-256 of each
-- key, never the key: the API shows the key once, in the answer to its
-- creation. A revoked key keeps its row (revoked_at set) for the record; it
-- is no longer found, listed or accepted.
--
-- ON DELETE CASCADE: deleting a customer deletes its keys (they could only
-- name a customer that no longer exists); the customer's deletion is what
-- the audit log records.
CREATE TABLE api_keys (
    id           text        COLLATE "C" PRIMARY KEY CHECK (id ~ '^key_[A-Za-z0-9]{16,64}$'),
    customer_id  text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    name         text        NOT NULL DEFAULT '' CHECK (char_length(name) <= 100),
    prefix       text        NOT NULL CHECK (char_length(prefix) = 8),
    digest       bytea       NOT NULL UNIQUE CHECK (octet_length(digest) = 32),
    created_at   timestamptz NOT NULL,
    expires_at   timestamptz CHECK (expires_at > created_at),
    revoked_at   timestamptz,
    -- Kept to the minute, written in batches off the check path.
    last_used_at timestamptz
);

-- A customer's keys, listed by id.
CREATE INDEX api_keys_customer_id ON api_keys (customer_id, id);
