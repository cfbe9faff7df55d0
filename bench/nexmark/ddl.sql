-- The Nexmark streams (docs/nexmark.md): the three event types of one generated sequence,
-- with nexmark-flink's 4-second watermark delay. The bench replaces {options} with the
-- run's events, splits, seed, event_rate and format.
CREATE STREAM person (
  id BIGINT, name VARCHAR, email_address VARCHAR, credit_card VARCHAR, city VARCHAR,
  state VARCHAR, date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', table = 'person', {options});

CREATE STREAM auction (
  id BIGINT, item_name VARCHAR, description VARCHAR, initial_bid BIGINT, reserve BIGINT,
  date_time TIMESTAMP, expires TIMESTAMP, seller BIGINT, category BIGINT, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', table = 'auction', {options});

CREATE STREAM bid (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  date_time TIMESTAMP, extra VARCHAR,
  WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND
) WITH (connector = 'nexmark', table = 'bid', {options});

-- The bids in processing time (q12): no event-time column, and p_time is the wall-clock
-- time the row was generated (nexmark-flink's PROCTIME()).
CREATE STREAM bid_proctime (
  auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR,
  date_time TIMESTAMP, extra VARCHAR, p_time TIMESTAMP
) WITH (connector = 'nexmark', table = 'bid', {options});

-- The side input of q13: a bounded table read from a file, key -> its decimal text for
-- keys 0 to 9,999 (nexmark-flink's side_input.txt). The bench writes the file into a
-- temporary directory and replaces {side_input_path} with its path.
CREATE TABLE side_input (key BIGINT PRIMARY KEY, value VARCHAR)
  WITH (connector = 'file', path = '{side_input_path}', format = 'csv');
