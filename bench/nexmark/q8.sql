-- q8, monitor new users: the people who created an auction in the 10-second tumbling
-- window they registered in. A window join of two windowed groupings (people by id and
-- name, auctions by seller), emitted when the window closes.
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(person, date_time, INTERVAL '10' SECOND)
  GROUP BY id, name, window_start, window_end
) P
JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime
  FROM TUMBLE(auction, date_time, INTERVAL '10' SECOND)
  GROUP BY seller, window_start, window_end
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime;
