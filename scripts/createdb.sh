#!/bin/sh
# createdb.sh URL creates the database a PostgreSQL connection URL names,
# unless it exists, by connecting to the same server's postgres database:
# make run's first step, so that QUOTAD_DATABASE_URL may name any
# database. URL is a postgres:// (or postgresql://) URL, or a key=value
# connection string. It needs psql and createdb (PostgreSQL's client).
set -eu
url=$1
case $url in
postgres://* | postgresql://*)
	# scheme://[userinfo@]host[:port][/dbname][?params]
	rest=${url#*://}
	authority=${rest%%/*}
	path=${rest#"$authority"}
	path=${path#/}
	db=${path%%\?*}
	params=${path#"$db"}
	maintenance="${url%%://*}://$authority/postgres$params"
	;;
*)
	db=$(printf '%s\n' "$url" | sed -n "s/.*dbname='*\([^ ']*\).*/\1/p")
	# In a connection string the last value of a key wins.
	maintenance="$url dbname=postgres"
	;;
esac
if [ -z "$db" ]; then
	exit 0 # no database named: PostgreSQL's default, the user's
fi
exists=$(printf "SELECT 1 FROM pg_database WHERE datname = :'db'\n" | psql "$maintenance" -X -q -t -A -v ON_ERROR_STOP=1 -v db="$db")
if [ "$exists" != 1 ]; then
	createdb --maintenance-db="$maintenance" "$db"
	echo "created database $db"
fi
