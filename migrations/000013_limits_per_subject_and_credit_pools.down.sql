-- Credit pools go with their schemas, and limits per subject with them:
-- the quotad of 000012 would count them for the customer as a whole.
DROP TABLE credit_rates;

DELETE FROM overrides WHERE per = 'subject';
ALTER TABLE overrides
    DROP CONSTRAINT overrides_pkey,
    DROP COLUMN per,
    ADD PRIMARY KEY (customer_id, metric, quota_window);

DELETE FROM plan_limits WHERE per = 'subject';
ALTER TABLE plan_limits
    DROP CONSTRAINT plan_limits_pkey,
    DROP COLUMN per,
    ADD PRIMARY KEY (plan_key, metric, quota_window);
