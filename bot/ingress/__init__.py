"""Events entering the bot: parsing deliveries into typed events, and the inbox they wait in."""
