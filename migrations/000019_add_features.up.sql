-- Features: what a plan grants besides metered limits (a switch, a number,
-- a level), and a customer's overrides of them. A value is a JSON boolean,
-- integer or string; quotad validates it (see tiers.ParseFeatureValue),
-- the checks below keep the shape.
ALTER TABLE plans ADD COLUMN features jsonb NOT NULL DEFAULT '{}'
    CHECK (jsonb_typeof(features) = 'object');

CREATE TABLE feature_overrides (
    customer_id text        COLLATE "C" NOT NULL REFERENCES customers (id) ON DELETE CASCADE,
    feature     text        COLLATE "C" NOT NULL CHECK (feature ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    value       jsonb       NOT NULL CHECK (jsonb_typeof(value) IN ('boolean', 'number', 'string')),
    expires_at  timestamptz,
    reason      text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at  timestamptz NOT NULL,
    updated_at  timestamptz NOT NULL,
    PRIMARY KEY (customer_id, feature)
);
