DROP TABLE plan_assignments;
