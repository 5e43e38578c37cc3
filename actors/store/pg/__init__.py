"""The PostgreSQL backend of the store: connections (psycopg 3 in worker threads), schema, full text."""
