-- A table of a database is not a stream.
SELECT * FROM dim_users;
