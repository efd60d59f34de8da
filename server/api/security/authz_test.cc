#include "server/api/security/authz.h"

#include "gtest/gtest.h"

namespace plimsoll::server {
namespace {

TEST(SubjectAttributeTest, ParsesRfc2253WithEscapesAndRepeats) {
  const std::string subject = "CN=ops\\, the admin,OU=plimsoll-admin,OU=team-b+OU=x,O=Example\\, Inc.";
  EXPECT_EQ(SubjectAttribute(subject, "CN"), std::vector<std::string>{"ops, the admin"});
  EXPECT_EQ(SubjectAttribute(subject, "ou"), (std::vector<std::string>{"plimsoll-admin", "team-b", "x"}));
  EXPECT_EQ(SubjectAttribute(subject, "O"), std::vector<std::string>{"Example, Inc."});
  EXPECT_TRUE(SubjectAttribute(subject, "L").empty());
  EXPECT_TRUE(SubjectAttribute("", "OU").empty());
  // An OU value that merely contains the text is not the OU.
  EXPECT_TRUE(SubjectAttribute("CN=OU\\=plimsoll-admin", "OU").empty());
}

TEST(RoleForTest, Table) {
  RoleRules rules = RoleRules::Defaults();
  rules.admin_common_names = {"cp-1"};
  rules.reader_common_names = {"grafana"};
  struct Row {
    std::string cn;
    std::vector<std::string> ous;
    Role role;
  };
  const std::vector<Row> rows = {
      {"anyone", {"plimsoll-admin"}, Role::kAdmin},
      {"anyone", {"plimsoll-reader"}, Role::kReader},
      {"anyone", {"plimsoll-reader", "plimsoll-admin"}, Role::kAdmin},  // the higher role wins
      {"cp-1", {}, Role::kAdmin},
      {"grafana", {}, Role::kReader},
      {"grafana", {"plimsoll-admin"}, Role::kAdmin},
      {"nobody", {"elsewhere"}, Role::kNone},
      {"", {}, Role::kNone},
      {"Plimsoll-Admin", {"PLIMSOLL-ADMIN"}, Role::kNone},  // exact match only
  };
  for (const Row& r : rows) EXPECT_EQ(RoleFor(rules, r.cn, r.ous), r.role) << r.cn;
  // An empty CN never matches an empty-string rule entry.
  RoleRules odd;
  odd.admin_common_names = {""};
  EXPECT_EQ(RoleFor(odd, "", {}), Role::kNone);
}

TEST(RequiredRoleTest, ReadsNeedReaderEverythingElseAdmin) {
  for (const char* m : {"ListGuests", "GetGuest", "GetHostStatus", "GetHostLine", "ListGuestPolicies", "Watch",
                        "/plimsoll.v1.Control/ListGuests"}) {
    EXPECT_EQ(RequiredRole(m), Role::kReader) << m;
  }
  for (const char* m : {"SetGuestPolicy", "ClearGuestPolicy", "SetHostPolicy", "Reclaim",
                        "/plimsoll.v1.Control/Reclaim", "SomethingAddedLater"}) {
    EXPECT_EQ(RequiredRole(m), Role::kAdmin) << m;
  }
}

}  // namespace
}  // namespace plimsoll::server
