# Define your item pipelines here
#
# Don't forget to add your pipeline to the ITEM_PIPELINES setting
# See: https://docs.scrapy.org/en/latest/topics/item-pipeline.html


# useful for handling different item types with a single interface
from itemadapter import ItemAdapter
from scrapy.exceptions import DropItem


class OwnProjectPipeline:
    def process_item(self, item):
        adapter = ItemAdapter(item)
        if not adapter.get("url"):
            raise DropItem("no url")
        adapter["title_words"] = len((adapter.get("title") or "").split())
        adapter["checked"] = True
        return item
