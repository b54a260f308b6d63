DROP TABLE granted_usage;
DROP TABLE grant_draws;
DROP TABLE grants;
