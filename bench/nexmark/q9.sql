-- q9, winning bids: each auction with its highest bid made during its lifetime (ties: the
-- earliest), a Top-1 per auction over the whole stream (ROW_NUMBER() without a window): a
-- higher bid takes the auction's row back and gives the new one (docs/sql.md,
-- "Changelogs").
SELECT id, item_name, description, initial_bid, reserve, date_time, expires, seller, category, extra,
       auction, bidder, price, bid_date_time, bid_extra
FROM (
  SELECT A.id, A.item_name, A.description, A.initial_bid, A.reserve, A.date_time, A.expires, A.seller,
         A.category, A.extra, B.auction, B.bidder, B.price, B.date_time AS bid_date_time, B.extra AS bid_extra,
         ROW_NUMBER() OVER (PARTITION BY A.id ORDER BY B.price DESC, B.date_time ASC) AS rownum
  FROM auction A JOIN bid B
    ON A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
) X
WHERE rownum <= 1;
