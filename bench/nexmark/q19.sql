-- q19, auction Top-10 price: the ten highest bids of each auction over the whole stream,
-- numbered (ROW_NUMBER() without a window, as nexmark-flink runs it): a higher bid takes
-- back the rows it pushes down or out and gives them again with their new numbers
-- (docs/sql.md, "Changelogs"). Ties in price are broken by time and bidder so that the
-- result does not depend on arrival order (nexmark-flink orders by price only).
SELECT auction, bidder, price, channel, url, date_time, extra, rank_number
FROM (SELECT auction, bidder, price, channel, url, date_time, extra,
             ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC, date_time, bidder) AS rank_number
      FROM bid) b
WHERE rank_number <= 10;
