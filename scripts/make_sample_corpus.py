"""Generate the fictional sample corpus under ``data/sample/``.

The corpus is a small knowledge base of an invented company, Northwind Robotics
(北风机器人有限公司), written in English and Chinese. Every fact in it is made up and the
documents agree with each other. The end-to-end tests and the demo use it. It
covers every input format the pipeline reads:

* Markdown, plain text, CSV, HTML in UTF-8 and HTML in GBK
* DOCX with heading styles and a table
* text-layer PDFs in English and Chinese, two pages each
* an XLSX workbook with several sheets
* two scanned page images (PNG) that need OCR, one English and one Chinese
* ``<file>.meta.json`` sidecars, including one withdrawn document and one
  confidential (finance-only) document

``data/sample_facts.md`` lists questions with their expected answers and source
files, plus questions the corpus cannot answer.

The files committed under ``data/sample/`` are the output of this script. Do not
edit them by hand: change the content here and run it again::

    python scripts/make_sample_corpus.py [--out data/sample] [--check-ocr]

The output is deterministic. Fixed seeds, fixed document dates and fixed ZIP entry
timestamps mean that a rebuild with the same library versions and fonts gives
byte-identical files. Requirements: fpdf2, python-docx, openpyxl, pillow, numpy,
fontTools (installed with fpdf2), the Noto Sans CJK fonts (Debian
``fonts-noto-cjk``) and DejaVu fonts. ``--check-ocr`` also needs pytesseract and
tesseract with ``eng`` and ``chi_sim``.

The Chinese PDF uses Noto Sans CJK SC. fpdf2 embeds that font's CFF outlines in a
form pdfminer/pdfplumber cannot read (they extract no text), so the script first
subsets the font to the characters it needs and converts the outlines to TrueType
(glyf) with fontTools. The PDF then uses a standard ``Identity-H`` CID TrueType font.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import re
import string
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# =============================================================================
# Constants
# =============================================================================

FIXED_DATETIME = dt.datetime(2026, 3, 1, 9, 0, 0, tzinfo=dt.timezone.utc)
FIXED_DATETIME_NAIVE = FIXED_DATETIME.replace(tzinfo=None)
ZIP_DATE_TIME = (2026, 3, 1, 9, 0, 0)
W3CDTF = "2026-03-01T09:00:00Z"
RANDOM_SEED = 20260301

DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "sample"

COMPANY_EN = "Northwind Robotics"
COMPANY_ZH = "北风机器人"
DOMAIN = "northwind-robotics.example"

# =============================================================================
# Content: handbook (English, Markdown)
# =============================================================================

EMPLOYEE_HANDBOOK_EN_MD = """\
# Northwind Robotics Employee Handbook

Version 3.2, effective 1 January 2026. Owner: People & Culture (HR).

## 1. About this handbook

This handbook applies to all employees of Northwind Robotics Co., Ltd. (北风机器人有限公司) in mainland China: the Shanghai headquarters, the Suzhou R&D Center and the Shenzhen assembly plant. The Chinese handbook (员工手册) adds rules for specific offices, such as overtime pay and hotel limits by city. Where both handbooks cover a topic, both apply.

## 2. Working hours

Standard working hours are 9:00 to 18:00, Monday to Friday, with a one-hour lunch break. Office staff may start at any time between 8:30 and 10:00 if they work a full eight hours.

## 3. Annual leave

Full-time employees receive 15 working days of paid annual leave per calendar year.

Each completed year of service adds one more day of annual leave, up to a maximum of 20 days per year. Employees who join during the year get annual leave in proportion to the months remaining after their start date.

Employees may carry over up to 5 unused days into the next year. Carried-over days must be taken by March 31 of that year. After March 31 they expire and are not paid out.

Request annual leave in NorthDesk, the HR portal. Leave of more than 3 consecutive working days must be requested at least 10 working days in advance.

## 4. Sick leave

Employees are entitled to 10 days of fully paid sick leave per calendar year.

If you are ill, notify your manager before 10:00 on the first day of absence.

Absences of more than 2 consecutive days require a medical certificate. Sick leave beyond 10 days is paid according to local regulations.

## 5. Remote work

With their manager's approval, employees may work remotely up to 2 days per week. Remote work is not available during the 3-month probation period.

When working remotely, be reachable on chat during the core hours of 10:00 to 16:00 China Standard Time. Always connect through the company VPN (NorthGate). The IT VPN runbook explains how to set it up.

Roles that work directly with X-2000 or R-500 hardware in the lab or the plant must be on site.

## 6. Business travel

Your manager must approve each trip in NorthDesk before you book. Book flights and hotels through the corporate travel desk (travel@northwind-robotics.example).

Fly economy class on flights under 6 hours and premium economy on longer flights. Business class requires approval from a vice president.

Hotel limits per night depend on the city tier. They are listed in the reimbursement table of the Chinese handbook (员工手册).

## 7. Expense reimbursement

Submit expense claims in NorthDesk within 30 days after the trip ends. Other expenses must be claimed within 30 days of the expense date. Late claims are rejected unless the Finance Director approves them.

The meal allowance is up to 150 CNY per day for domestic travel and up to 60 USD per day for international travel.

Any single expense over 100 CNY needs the original receipt or an electronic fapiao.

Approved expenses are paid with the next monthly salary on the 10th of the month. Personal entertainment, hotel minibar items and traffic fines are never reimbursed. The Finance department announces changes to the expense rules by memo.

## 8. Contacts

HR questions: hr@northwind-robotics.example. IT problems: the IT helpdesk on extension 8000.
"""

# =============================================================================
# Content: withdrawn policy (English, Markdown)
# =============================================================================

OLD_LEAVE_POLICY_2019_MD = """\
# Annual Leave Policy (2019)

Effective 1 March 2019. Owner: Human Resources.

Full-time employees receive 10 working days of paid annual leave per year. The number of days does not increase with years of service.

Unused annual leave cannot be carried over. Any remaining days expire on December 31.

Request annual leave by email to HR at least 4 weeks in advance.
"""

# =============================================================================
# Content: confidential finance memo (English, Markdown)
# =============================================================================

BUDGET_MEMO_2026_MD = """\
# 2026 Budget Guidance (Confidential)

From: Office of the CFO. To: Finance team and department heads. Date: 20 January 2026.

The board approved a company-wide operating budget of 312 million CNY for 2026.

The R&D budget for 2026 is 48 million CNY. Most of it funds the next-generation X-3000 arm and new navigation software for the R-500.

The salary increase pool is 4.5% of base payroll. Increases take effect on April 1, 2026.

Non-engineering roles are under a hiring freeze until June 30, 2026. Exceptions need CFO approval.

The target gross margin for the X-2000 is 42%, and for the R-500 it is 35%.

Do not share this memo outside the finance group.
"""

# =============================================================================
# Content: FAQ (English, plain text)
# =============================================================================

NOTES_TXT = """\
Northwind Robotics - Office FAQ (Shanghai headquarters)

Q: What is the guest Wi-Fi?
A: The guest network is called "NW-Guest". Its password changes every Monday and is shown at the reception desk. Employees use the "NW-Staff" network and sign in with their directory account.

Q: When is the canteen open?
A: The canteen on the 2nd floor serves lunch from 11:30 to 13:30, Monday to Friday.

Q: How do I contact IT?
A: Call the IT helpdesk on extension 8000 or email it-help@northwind-robotics.example. The helpdesk is staffed from 8:30 to 19:00 on working days.

Q: When is salary paid?
A: On the 10th of each month. If the 10th is a public holiday or a weekend, salary is paid on the working day before it.

Q: Is there parking for employees?
A: Floor B2 of the underground garage has 20 spaces for employees. Apply in NorthDesk. The monthly fee is 300 CNY.

Q: I lost my badge. What should I do?
A: Report it to the security desk at reception right away. A replacement badge costs 50 CNY.
"""

# =============================================================================
# Content: Chinese handbook (DOCX)
# Each entry is (kind, payload): kind is "title", "h1", "h2", "p" or "table".
# =============================================================================

HANDBOOK_ZH_DOCX: list[tuple[str, object]] = [
    ("title", "北风机器人员工手册（中国办公室版）"),
    ("p", "版本 2026 年第 1 版，自 2026 年 1 月 1 日起生效。本手册由人力资源部负责解释。"),
    ("h1", "一、总则"),
    ("p", "本手册适用于北风机器人有限公司上海总部、苏州研发中心和深圳装配工厂的全体员工。"
          "本手册与英文版《Employee Handbook》配合使用，两者规定一致；本手册补充了各办公室的具体规定。"),
    ("h1", "二、考勤与工作时间"),
    ("p", "标准工作时间为周一至周五 9:00–18:00，午休 12:00–13:00。办公室员工可在 8:30–10:00 之间弹性上班，每天须工作满 8 小时。"),
    ("p", "深圳装配工厂实行两班制：早班 8:00–16:30，晚班 16:30–次日 1:00。员工须刷工牌考勤。"),
    ("h1", "三、假期"),
    ("h2", "3.1 年假"),
    ("p", "全职员工每年享有 15 个工作日的带薪年假；每满一年工龄增加 1 天，最多 20 天。"),
    ("p", "当年未休完的年假最多可结转 5 天至次年，结转的年假须在次年 3 月 31 日前休完，逾期作废，不折算工资。"),
    ("p", "年假以半天为最小单位，须通过 NorthDesk 系统提交申请，由直属主管审批。连续休假超过 3 个工作日的，须至少提前 10 个工作日申请。"),
    ("h2", "3.2 病假"),
    ("p", "员工每年享有 10 天全薪病假。请病假须在当天 10:00 前通知直属主管。"),
    ("p", "连续病假超过 2 天的，须提交二级及以上医院出具的诊断证明。超过 10 天的病假按当地法规计发病假工资。"),
    ("h2", "3.3 其他假期"),
    ("p", "婚假、产假、陪产假等按国家及当地法规执行。上海总部员工可享受 10 天陪产假。"),
    ("h1", "四、加班"),
    ("p", "加班须提前在 NorthDesk 提交申请并经部门主管批准；未经批准的加班不计入加班时长。"),
    ("p", "工作日加班按本人工资的 1.5 倍计发加班费；休息日加班优先安排调休，无法调休的按 2 倍计发；法定节假日加班按 3 倍计发。"),
    ("p", "每月加班时间原则上不超过 36 小时。工作日加班至 21:00 以后的，可凭发票报销回家的出租车费用。"),
    ("h1", "五、费用报销"),
    ("h2", "5.1 差旅报销"),
    ("p", "出差前须在 NorthDesk 提交出差申请并经直属主管批准。差旅费用须在出差结束后 30 天内通过 NorthDesk 提交报销，"
          "逾期提交的须经财务总监批准方可报销。"),
    ("p", "单笔超过 100 元的费用须提供发票原件或电子发票。"),
    ("p", "国内出差的住宿、餐补和市内交通标准如下表（按城市类别）："),
    ("table", {
        "header": ["城市类别", "包含城市", "住宿标准（元/晚）", "餐补（元/天）", "市内交通（元/天）"],
        "rows": [
            ["一类城市", "北京、上海、广州、深圳", "600", "150", "100"],
            ["二类城市", "杭州、南京、苏州、成都、武汉", "450", "150", "80"],
            ["其他城市", "上述城市以外的国内城市", "350", "150", "60"],
        ],
    }),
    ("p", "住宿费用超出标准的部分由员工自行承担；展会期间等特殊情况须事先经副总裁批准。"),
    ("h2", "5.2 报销款发放"),
    ("p", "审核通过的报销款随下一次工资（每月 10 日）一并发放。个人娱乐、酒店迷你吧消费和交通罚款不予报销。"),
    ("h1", "六、上海总部办公室须知"),
    ("p", "上海总部地址：上海市浦东新区碧波路 188 号北风大厦。访客须提前一天在前台系统登记，并由员工全程陪同。"),
    ("p", "员工餐厅位于 2 楼，午餐供应时间为周一至周五 11:30–13:30。"),
]

# =============================================================================
# Content: X-2000 datasheet (English PDF, 2 pages)
# =============================================================================

X2000_PDF = {
    "title": "Northwind X-2000 Collaborative Robot Arm",
    "subtitle": "Product datasheet - document NW-DS-X2000, revision C, March 2026",
    "page1": {
        "overview_heading": "Overview",
        "overview": [
            "The X-2000 is a six-axis collaborative robot arm for machine tending, palletizing "
            "and assembly. Force-torque sensing in every joint lets it work safely next to people. "
            "A built-in safety lidar slows the arm down when a person enters the work zone.",
            "Each X-2000 ships with the NC-7 controller. Program the arm with the TP-20 teach "
            "pendant, with the NWScript language, or through the ROS 2 driver.",
        ],
        "spec_heading": "Technical specifications",
        "specs": [
            ("Rated payload", "20 kg"),
            ("Reach", "1,400 mm"),
            ("Axes", "6"),
            ("Repeatability", "±0.03 mm"),
            ("Maximum TCP speed", "2.0 m/s"),
            ("Arm weight", "64 kg"),
            ("Protection class", "IP54"),
            ("Power supply", "200-240 V AC, 50/60 Hz"),
            ("Typical power consumption", "450 W"),
            ("Controller", "NC-7 (included)"),
            ("Operating temperature", "0 to 45 °C"),
            ("Safety lidar", "range 0.2-5 m; slow-down zone 1.5 m; stop zone 0.5 m"),
            ("Warranty", "24 months"),
        ],
    },
    "page2": {
        "error_heading": "Error codes",
        "error_intro": "The teach pendant and the NC-7 status display show active error codes. "
                       "Fix the cause, then acknowledge the error on the teach pendant.",
        "errors": [
            ("E-12", "Joint overcurrent (J1-J6)",
             "Reduce the payload or speed and check for a collision, then restart the controller. "
             "If E-12 occurs 3 times within one hour, contact service."),
            ("E-23", "Emergency stop pressed",
             "Release the emergency stop button and acknowledge on the teach pendant."),
            ("E-31", "Controller overtemperature (above 70 °C)",
             "Clean the NC-7 air filter and keep 10 cm of free space around the controller."),
            ("E-45", "Safety lidar sensor blocked or dirty",
             "Remove the obstruction and clean the lidar window with a dry microfiber cloth. "
             "Until the error is cleared, the arm runs at a reduced speed of 250 mm/s."),
            ("E-58", "Encoder communication lost",
             "Check the joint cable connectors. If the error remains, contact service."),
            ("E-66", "Payload exceeds the rated 20 kg",
             "Reduce the payload and check the tool weight in the configuration."),
        ],
        "maint_heading": "Maintenance schedule",
        "maintenance": [
            "Weekly: clean the safety lidar window.",
            "Monthly: inspect the cables and test the emergency stop button.",
            "Every 5,000 operating hours: re-grease joints J1 to J3.",
            "Every 12 months: full service by an authorized Northwind service center.",
        ],
        "support": "Service hotline: 400-800-6200 (Monday to Saturday, 8:00-20:00).\n"
                   "Service centers are listed in service_centers.csv.",
    },
}

# =============================================================================
# Content: R-500 manual (Chinese PDF, 2 pages)
# =============================================================================

R500_PDF = {
    "title": "北风 R-500 商用清洁机器人 产品手册",
    "subtitle": "文档编号 NW-UM-R500，版本 B，2026 年 2 月",
    "page1": {
        "intro_heading": "产品简介",
        "intro": [
            "R-500 是一款面向写字楼、商场和仓库的商用扫洗一体清洁机器人。机器人采用激光雷达与视觉融合导航，"
            "能够自动规划清洁路线，电量不足时自动返回充电桩充电。",
            "首次使用前，请将电池充满电。请勿在积水深度超过 5 毫米的地面上使用本产品。",
        ],
        "spec_heading": "技术参数",
        "specs": [
            ("清洁宽度", "500 毫米"),
            ("清洁效率", "最高 1,200 平方米/小时"),
            ("电池", "25.6 V 40 Ah 磷酸铁锂电池（配件 BP-40）"),
            ("续航时间", "约 6 小时"),
            ("充电时间", "约 3 小时"),
            ("清水箱 / 污水箱", "20 升 / 18 升"),
            ("工作噪音", "不高于 62 dB"),
            ("整机重量", "48 千克"),
            ("最大爬坡角度", "8 度"),
            ("工作温度", "0–40 °C"),
            ("质保期", "12 个月"),
        ],
    },
    "page2": {
        "error_heading": "故障代码",
        "error_intro": "机器人发生故障时会停止工作，并在显示屏上显示故障代码。请按下表处理，处理后长按启动键 3 秒恢复工作。",
        "errors": [
            ("E-71", "滚刷缠绕或卡死", "关机后取下滚刷，清除缠绕的毛发和线头后重新装回。"),
            ("E-72", "污水箱已满", "排空污水箱并冲洗过滤网。"),
            ("E-73", "电池温度过高（超过 55 °C）", "停止使用，将机器人移到阴凉处冷却 30 分钟。"),
            ("E-76", "激光雷达脏污或被遮挡", "用干燥的软布擦拭雷达窗口，移除遮挡物。"),
            ("E-80", "驱动轮打滑或悬空", "检查地面是否湿滑或有台阶，将机器人放回平整地面。"),
            ("E-84", "充电桩对接失败", "检查充电桩电源和电极片是否清洁。"),
        ],
        "maint_heading": "维护周期",
        "maintenance": [
            "每天：清空污水箱，冲洗过滤网。",
            "每周：清理滚刷和边刷上的缠绕物。",
            "每运行 250 小时：更换 HEPA 滤网。",
            "每运行 500 小时：更换滚刷（配件 RB-5）。",
            "每 6 个月：由授权服务中心进行一次全面保养，检查电池、驱动轮和激光雷达。",
        ],
        "support": "全国服务热线：400-800-6200（周一至周六 8:00–20:00）。\n各地服务中心的地址和电话见 service_centers.csv。",
    },
}

# =============================================================================
# Content: price list (XLSX) and service centers (CSV)
# =============================================================================

PRICE_LIST_SHEETS = {
    "Price List 2026": {
        "header": ["Model", "Product", "Category", "List Price (CNY)", "Warranty (months)", "Lead Time (weeks)"],
        "rows": [
            ["X-2000", "X-2000 collaborative robot arm (incl. NC-7 controller)", "Robot arm", 168000, 24, 6],
            ["TP-20", "Teach pendant for X-2000", "Accessory", 12800, 12, 2],
            ["NC-7", "Spare NC-7 controller", "Spare part", 36000, 12, 4],
            ["GR-2", "Electric gripper for X-2000", "Accessory", 9600, 12, 2],
            ["SP-1", "Annual service plan for X-2000", "Service", 15000, 12, 0],
            ["R-500", "R-500 commercial cleaning robot", "Cleaning robot", 39800, 12, 3],
            ["BP-40", "R-500 battery pack 25.6 V 40 Ah", "Spare part", 6200, 12, 2],
            ["RB-5", "R-500 roller brush kit (2 pcs)", "Consumable", 480, 3, 1],
            ["CS-5", "R-500 charging station", "Accessory", 3500, 12, 2],
        ],
    },
    "Specs": {
        "header": ["Model", "Type", "Weight (kg)", "Power", "Key spec"],
        "rows": [
            ["X-2000", "6-axis collaborative arm", 64, "200-240 V AC, 450 W", "Payload 20 kg, reach 1,400 mm"],
            ["R-500", "Scrubber-dryer cleaning robot", 48, "25.6 V 40 Ah LiFePO4", "Cleaning width 500 mm, runtime about 6 h"],
        ],
    },
    "Notes": {
        "header": ["Note"],
        "rows": [
            ["All prices are in CNY and exclude 13% VAT."],
            ["Prices are valid from 2026-01-01 to 2026-12-31."],
            ["Education and research customers receive a 10% discount on robots (not on services)."],
            ["Warranty starts on the delivery date."],
        ],
    },
}

SERVICE_CENTERS_HEADER = ["城市", "地址", "电话", "营业时间"]
SERVICE_CENTERS_ROWS = [
    ["上海", "上海市浦东新区碧波路 188 号北风大厦 1 楼", "021-5555-0188", "周一至周六 9:00-18:00"],
    ["北京", "北京市海淀区上地信息路 26 号 3 层", "010-5555-0126", "周一至周五 9:00-18:00"],
    ["深圳", "深圳市南山区高新南七道 15 号", "0755-5555-0115", "周一至周六 9:00-18:00"],
    ["苏州", "苏州工业园区星湖街 328 号", "0512-5555-0328", "周一至周五 8:30-17:30"],
    ["成都", "成都市高新区天府大道中段 666 号 12 层", "028-5555-0666", "周一至周五 9:00-17:30"],
    ["武汉", "武汉市东湖高新区光谷大道 77 号", "027-5555-0077", "周一至周五 9:00-17:30"],
]

# =============================================================================
# Content: IT runbooks (HTML)
# =============================================================================

VPN_RUNBOOK_HTML = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>VPN and Account Runbook - Northwind IT</title>
<link rel="stylesheet" href="/static/intranet.css">
</head>
<body>
<header class="site-header">
  <nav class="top-nav">
    <a href="/">Intranet Home</a> |
    <a href="/hr">HR</a> |
    <a href="/it">IT Services</a> |
    <a href="/products">Products</a> |
    <a href="/search">Search</a> |
    <a href="/login">Sign in</a>
  </nav>
</header>
<div class="breadcrumb">Home &gt; IT Services &gt; Runbooks &gt; VPN</div>
<main id="content">
<article>
<h1>VPN and Account Runbook</h1>
<p>Owner: IT Infrastructure. Last reviewed: February 2026.</p>

<h2>Resetting your VPN access</h2>
<p>The NorthGate VPN (vpn.northwind-robotics.example) uses your directory password plus a one-time code from the NW Authenticator app. Reset your VPN access when you get a new phone, when the one-time code is rejected, or when the client shows "profile expired".</p>
<ol>
  <li>Open the self-service portal at https://id.northwind-robotics.example and sign in.</li>
  <li>Choose "Reset VPN token" and confirm with the code sent to your registered mobile number.</li>
  <li>Scan the new QR code with the NW Authenticator app.</li>
  <li>In the NorthGate client, remove the old profile and import the new one with File &gt; Import profile.</li>
  <li>Connect and check that the status shows "Connected - Shanghai-GW1".</li>
</ol>
<p>After 5 failed login attempts the account is locked for 30 minutes. To unlock it sooner, call the IT helpdesk on extension 8000.</p>

<h2>Password policy</h2>
<ul>
  <li>Passwords must be at least 12 characters long.</li>
  <li>Use at least three of the four character classes: upper case, lower case, digits and symbols.</li>
  <li>Change your password every 90 days. Reminders start 14 days before it expires.</li>
  <li>You cannot reuse any of your last 5 passwords.</li>
  <li>Multi-factor authentication is mandatory for VPN, email and NorthDesk.</li>
  <li>Never share your password. IT staff will never ask for it.</li>
</ul>

<h2>On-call escalation</h2>
<p>Level 1 is the IT helpdesk (extension 8000, 8:30-19:00 on working days). If Level 1 cannot solve a problem within 30 minutes, it escalates to Level 2.</p>
<p>Level 2 is the on-call engineer, paged through the "it-oncall" rotation. Outside business hours, call the on-call phone at +86 21 5555 0199. P1 incidents go straight to Level 2; severity levels and response times are defined in the Chinese operations runbook (运维手册).</p>
<p>Level 3 is the infrastructure lead. Level 2 brings in Level 3 if a P1 incident is not resolved within 2 hours.</p>
</article>
</main>
<aside class="sidebar">
  <h3>Related links</h3>
  <ul><li><a href="/it/ops">运维手册</a></li><li><a href="/it/request">Open an IT request</a></li></ul>
</aside>
<footer class="site-footer">
  <p>&copy; 2026 Northwind Robotics Co., Ltd. Internal use only.</p>
  <p>Questions about this page? Contact it-help@northwind-robotics.example.</p>
  <p><a href="/privacy">Privacy</a> | <a href="/accessibility">Accessibility</a> | <a href="/sitemap">Sitemap</a></p>
</footer>
</body>
</html>
"""

# Encoded in GBK on disk, as its charset declaration says.
OPS_RUNBOOK_ZH_HTML = """\
<!DOCTYPE html>
<html lang="zh-CN">
<head>
<meta charset="gbk">
<title>运维手册 - 北风机器人信息技术部</title>
<link rel="stylesheet" href="/static/intranet.css">
</head>
<body>
<div id="header">
  <ul class="nav">
    <li><a href="/">内网首页</a></li>
    <li><a href="/hr">人力资源</a></li>
    <li><a href="/it">信息技术</a></li>
    <li><a href="/products">产品中心</a></li>
    <li><a href="/search">搜索</a></li>
  </ul>
</div>
<div class="breadcrumb">首页 &gt; 信息技术 &gt; 运维手册</div>
<div id="main">
<h1>运维手册</h1>
<p>负责部门：信息技术部基础架构组。最近审核：2026 年 2 月。</p>

<h2>一、服务器备份</h2>
<p>生产服务器（ERP、NorthDesk 和代码仓库）每天凌晨 02:00 进行增量备份，每周日凌晨 03:00 进行全量备份。</p>
<p>每日增量备份保留 30 天，每周全量备份保留 12 周。每月 1 日将上月最后一次全量备份复制到成都异地机房，异地备份保留 3 年。</p>
<p>每季度第一个月进行一次备份恢复演练，演练结果记录在运维知识库中。</p>
<p>备份失败时监控系统会自动告警，值班工程师须在次日 09:00 前完成补备份。</p>

<h2>二、故障等级</h2>
<table border="1">
  <tr><th>等级</th><th>定义</th><th>响应时间</th><th>恢复目标</th></tr>
  <tr><td>P1</td><td>核心业务中断，例如 ERP 或生产线控制系统不可用，影响全公司或导致工厂停产</td><td>15 分钟内</td><td>4 小时内</td></tr>
  <tr><td>P2</td><td>重要功能受损，或部分用户无法使用</td><td>30 分钟内</td><td>8 小时内</td></tr>
  <tr><td>P3</td><td>一般问题，有临时解决办法</td><td>4 小时内</td><td>3 个工作日内</td></tr>
  <tr><td>P4</td><td>咨询或优化需求</td><td>1 个工作日内</td><td>按计划排期</td></tr>
</table>
<p>发生 P1 故障时，值班工程师须同时通知信息技术总监和受影响部门负责人，并每 30 分钟通报一次处理进展。</p>
<p>故障解决后 5 个工作日内，须提交故障复盘报告。</p>

<h2>三、机房环境</h2>
<p>机房温度应保持在 18–27 °C，相对湿度 40%–60%。机房门禁卡由信息技术部统一发放，每半年复核一次权限。</p>
</div>
<div id="footer">
  <p>版权所有 &copy; 2026 北风机器人有限公司 信息技术部 | 内部资料，请勿外传</p>
  <p><a href="/about">关于我们</a> | <a href="/contact">联系我们</a> | <a href="/sitemap">网站地图</a></p>
</div>
</body>
</html>
"""

# =============================================================================
# Content: scanned pages (PNG, need OCR)
# =============================================================================

SCAN_EN_LINES = [
    ("NORTHWIND ROBOTICS - FINANCE DEPARTMENT", "bold"),
    ("MEMO", "bold"),
    ("", None),
    ("Date: 15 January 2026", None),
    ("To: All staff", None),
    ("Subject: Expense policy update 2026", "bold"),
    ("", None),
    ("From 1 February 2026 the following rules apply:", None),
    ("1. Taxi receipts above 200 CNY need manager approval", None),
    ("   before they can be reimbursed.", None),
    ("2. Ride-hailing trips must be claimed with an electronic", None),
    ("   invoice.", None),
    ("3. Team dinners are capped at 200 CNY per person.", None),
    ("4. Claims must still be submitted within 30 days.", None),
    ("", None),
    ("Questions: finance@northwind-robotics.example", None),
]

SCAN_ZH_LINES = [
    ("北风机器人安全须知", "bold"),
    ("", None),
    ("一、进入机房必须佩戴工牌，并在值班台登记。", None),
    ("二、机房内禁止饮食、吸烟和使用明火。", None),
    ("三、调试 X-2000 机械臂时必须佩戴护目镜，", None),
    ("    并与机械臂保持 1.5 米以上的距离。", None),
    ("四、实验室每天 22:00 以后禁止单人作业。", None),
    ("五、发现火情请立即拨打内线 8119，并从最近的", None),
    ("    安全出口有序撤离。", None),
    ("", None),
    ("行政安全部  2026 年 1 月", None),
]

# Mean word confidence that the OCR check in ``--check-ocr`` requires.
OCR_MIN_CONFIDENCE = {"eng": 80.0, "chi_sim": 70.0}

# =============================================================================
# Content: sidecar metadata (<file>.meta.json)
# =============================================================================

SIDECARS: dict[str, dict] = {
    "handbook/employee_handbook_en.md": {
        "title": "Northwind Robotics Employee Handbook",
        "department": "HR",
        "security_level": "internal",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"hr@{DOMAIN}",
        "language": "en",
    },
    "handbook/员工手册.docx": {
        "title": "北风机器人员工手册（中国办公室版）",
        "department": "HR",
        "security_level": "internal",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"hr@{DOMAIN}",
        "language": "zh",
    },
    "handbook/old_leave_policy_2019.md": {
        "title": "Annual Leave Policy (2019)",
        "department": "HR",
        "security_level": "internal",
        "status": "withdrawn",
        "access_groups": ["all-staff"],
        "owner": f"hr@{DOMAIN}",
        "language": "en",
    },
    "products/x2000_datasheet.pdf": {
        "title": "X-2000 Collaborative Robot Arm Datasheet",
        "department": "Product",
        "security_level": "public",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"product@{DOMAIN}",
        "language": "en",
    },
    "products/产品手册_R500.pdf": {
        "title": "R-500 商用清洁机器人产品手册",
        "department": "Product",
        "security_level": "public",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"product@{DOMAIN}",
        "language": "zh",
    },
    "it/runbook_vpn.html": {
        "title": "VPN and Account Runbook",
        "department": "IT",
        "security_level": "internal",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"it-help@{DOMAIN}",
        "language": "en",
    },
    "it/运维手册.html": {
        "title": "运维手册",
        "department": "IT",
        "security_level": "internal",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"it-ops@{DOMAIN}",
        "language": "zh",
    },
    "scans/expense_policy_scan.png": {
        "title": "Expense policy update 2026 (scanned memo)",
        "department": "Finance",
        "security_level": "internal",
        "status": "published",
        "access_groups": ["all-staff"],
        "owner": f"finance@{DOMAIN}",
        "language": "en",
    },
    "finance/budget_memo_2026.md": {
        "title": "2026 Budget Guidance",
        "department": "Finance",
        "security_level": "confidential",
        "status": "published",
        "access_groups": ["finance"],
        "owner": f"cfo-office@{DOMAIN}",
        "language": "en",
    },
}

# =============================================================================
# Content: FACTS.md (questions for tests and the demo)
# Each answerable entry is (id, language, question, expected answer, source, location).
# =============================================================================

FACTS_ANSWERABLE: list[tuple[str, str, str, str, str, str]] = [
    ("en-01", "en", "What does error code E-45 mean on the X-2000?",
     "Safety lidar sensor blocked or dirty; remove the obstruction and clean the lidar window "
     "(the arm runs at reduced speed 250 mm/s until cleared)",
     "products/x2000_datasheet.pdf", "page 2"),
    ("en-02", "en", "What is the maximum payload of the X-2000 arm?",
     "20 kg", "products/x2000_datasheet.pdf", "page 1"),
    ("en-03", "en", "How many days of paid annual leave does a full-time employee get?",
     "15 working days per year, +1 day per completed year of service, up to 20 days "
     "(NOT 10: that is the withdrawn 2019 policy)",
     "handbook/employee_handbook_en.md", "## 3. Annual leave"),
    ("en-04", "en", "If I don't use all my vacation days, can I keep them for next year?",
     "Yes, up to 5 unused days carry over; they must be used by March 31, then they expire",
     "handbook/employee_handbook_en.md", "## 3. Annual leave"),
    ("en-05", "en", "How long do I have to hand in my travel expenses after a business trip?",
     "Within 30 days after the trip ends (late claims need Finance Director approval)",
     "handbook/employee_handbook_en.md", "## 7. Expense reimbursement"),
    ("en-06", "en", "How often do I have to change my password, and how long must it be?",
     "Every 90 days; at least 12 characters",
     "it/runbook_vpn.html", "Password policy"),
    ("en-07", "en", "My account got locked after too many wrong VPN logins. What now?",
     "It locks for 30 minutes after 5 failed attempts; call the IT helpdesk on extension 8000 to unlock sooner",
     "it/runbook_vpn.html", "Resetting your VPN access"),
    ("en-08", "en", "Does a 250 CNY taxi receipt need approval?",
     "Yes: taxi receipts above 200 CNY need manager approval (2026 expense policy update)",
     "scans/expense_policy_scan.png", "OCR"),
    ("en-09", "en", "What is the list price and warranty of the X-2000?",
     "168,000 CNY (excl. 13% VAT), 24 months warranty",
     "products/price_list.xlsx", "sheet 'Price List 2026'"),
    ("en-10", "en", "What is the name of the guest Wi-Fi network?",
     "NW-Guest (password changes every Monday, shown at reception)",
     "handbook/notes.txt", "-"),
    ("zh-01", "zh", "R-500 的故障代码 E-71 是什么意思？",
     "滚刷缠绕或卡死；关机后取下滚刷，清除缠绕的毛发和线头后重新装回",
     "products/产品手册_R500.pdf", "第 2 页"),
    ("zh-02", "zh", "R-500 的滚刷多久更换一次？",
     "每运行 500 小时更换滚刷（配件 RB-5）；另每 6 个月由授权服务中心全面保养",
     "products/产品手册_R500.pdf", "第 2 页"),
    ("zh-03", "zh", "R-500 充满电可以工作多长时间？",
     "约 6 小时（充电约 3 小时）",
     "products/产品手册_R500.pdf", "第 1 页"),
    ("zh-04", "zh", "去上海出差，酒店每晚最多能报销多少钱？",
     "600 元/晚（一类城市：北京、上海、广州、深圳）",
     "handbook/员工手册.docx", "5.1 差旅报销（表格）"),
    ("zh-05", "zh", "工作日加班的加班费怎么算？",
     "按本人工资的 1.5 倍（休息日 2 倍，法定节假日 3 倍）",
     "handbook/员工手册.docx", "四、加班"),
    ("zh-06", "zh", "P1 级故障要求多长时间内响应？",
     "15 分钟内响应，4 小时内恢复",
     "it/运维手册.html", "二、故障等级"),
    ("zh-07", "zh", "服务器什么时候做全量备份？",
     "每周日凌晨 03:00 全量备份（每天凌晨 02:00 增量备份）",
     "it/运维手册.html", "一、服务器备份"),
    ("zh-08", "zh", "深圳服务中心的电话是多少？",
     "0755-5555-0115",
     "products/service_centers.csv", "深圳 行"),
    ("zh-09", "zh", "进入机房有什么要求？",
     "必须佩戴工牌，并在值班台登记",
     "scans/安全须知_扫描.png", "OCR"),
]

# Other files that also answer a question (consistently with the main source).
FACTS_ALSO_IN: dict[str, list[str]] = {
    "en-03": ["handbook/员工手册.docx"],
    "en-04": ["handbook/员工手册.docx"],
    "en-05": ["handbook/员工手册.docx", "scans/expense_policy_scan.png"],
    "en-09": ["products/x2000_datasheet.pdf (warranty only)"],
    "zh-03": ["products/price_list.xlsx (sheet 'Specs', runtime about 6 h)"],
}

FACTS_UNANSWERABLE: list[tuple[str, str, str]] = [
    ("na-01", "en", "What will the weather be like in Shanghai tomorrow?"),
    ("na-02", "en", "Who won the 2022 FIFA World Cup final?"),
    ("na-03", "zh", "北风机器人的股票代码是多少？"),
    ("na-04", "zh", "红烧肉怎么做？"),
]

FACTS_SPECIAL = [
    ("handbook/old_leave_policy_2019.md",
     "**withdrawn** (sidecar `status: withdrawn`). It says 10 days of annual leave and no "
     "carry-over. This must never be served: en-03 must answer 15 days, not 10."),
    ("finance/budget_memo_2026.md",
     "**confidential**, `access_groups: [\"finance\"]`, department Finance. It holds the 2026 "
     "R&D budget (48 million CNY), the operating budget (312 million CNY) and the 4.5% salary "
     "increase pool. Ask \"What is the 2026 R&D budget?\": a user in the `finance` group gets "
     "48 million CNY; any other user must get no answer from this file."),
]


# =============================================================================
# Generation helpers
# =============================================================================


def _write_text(path: Path, text: str, encoding: str = "utf-8") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding=encoding, newline="\n") as fh:
        fh.write(text)


def _normalize_ooxml(path: Path) -> None:
    """Rewrite an OOXML zip with fixed entry timestamps and fixed core dates, so rebuilds are identical."""
    with zipfile.ZipFile(path) as zin:
        entries = [(info.filename, zin.read(info.filename)) for info in zin.infolist()]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zout:
        for name, data in entries:
            if name == "docProps/core.xml":
                text = data.decode("utf-8")
                text = re.sub(r"(<dcterms:created[^>]*>)[^<]*(</dcterms:created>)", rf"\g<1>{W3CDTF}\g<2>", text)
                text = re.sub(r"(<dcterms:modified[^>]*>)[^<]*(</dcterms:modified>)", rf"\g<1>{W3CDTF}\g<2>", text)
                data = text.encode("utf-8")
            info = zipfile.ZipInfo(name, date_time=ZIP_DATE_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zout.writestr(info, data)
    path.write_bytes(buf.getvalue())


def _find_cjk_font(bold: bool = False) -> tuple[str, int]:
    """Return (path, collection index) of Noto Sans CJK SC, regular or bold."""
    from fontTools.ttLib import TTCollection

    name = "NotoSansCJK-Bold.ttc" if bold else "NotoSansCJK-Regular.ttc"
    candidates = [
        Path("/usr/share/fonts/opentype/noto") / name,
        Path("/usr/share/fonts/noto-cjk") / name,
        Path("/usr/share/fonts/google-noto-cjk") / name,
    ]
    try:
        style = "Bold" if bold else "Regular"
        found = subprocess.run(
            ["fc-match", "-f", "%{file}", f"Noto Sans CJK SC:style={style}"],
            capture_output=True, text=True, check=False,
        ).stdout.strip()
        if found.endswith(".ttc"):
            candidates.append(Path(found))
    except OSError:
        pass
    for cand in candidates:
        if cand.is_file():
            coll = TTCollection(str(cand), lazy=True)
            for idx, font in enumerate(coll.fonts):
                if font["name"].getDebugName(1) == "Noto Sans CJK SC":
                    return str(cand), idx
    raise SystemExit(f"Noto Sans CJK SC ({name}) not found; install the Debian package fonts-noto-cjk")


def _find_latin_font(bold: bool = False) -> str:
    name = "DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf"
    path = Path("/usr/share/fonts/truetype/dejavu") / name
    if path.is_file():
        return str(path)
    found = subprocess.run(
        ["fc-match", "-f", "%{file}", "DejaVu Sans:style=" + ("Bold" if bold else "Book")],
        capture_output=True, text=True, check=False,
    ).stdout.strip()
    if found:
        return found
    raise SystemExit("DejaVu Sans not found; install the Debian package fonts-dejavu-core")


def _cjk_truetype_subset(src: str, index: int, text: str, out: Path) -> None:
    """Subset a CFF-flavoured OpenType font to ``text`` and convert it to TrueType outlines.

    fpdf2 embeds CFF CJK fonts with a custom CMap that pdfminer cannot decode, so
    the text layer would be unreadable to pdfplumber. A glyf-based font is embedded
    as Identity-H, which every PDF text extractor reads.
    """
    from fontTools import subset
    from fontTools.pens.cu2quPen import Cu2QuPen
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import TTFont, newTable

    font = TTFont(src, fontNumber=index, lazy=False, recalcTimestamp=False)
    opts = subset.Options()
    opts.layout_features = []
    opts.hinting = False
    opts.name_IDs = ["*"]
    opts.notdef_outline = True
    subsetter = subset.Subsetter(opts)
    subsetter.populate(text=text)
    subsetter.subset(font)

    order = font.getGlyphOrder()
    glyph_set = font.getGlyphSet()
    glyf = newTable("glyf")
    glyf.glyphOrder = order
    glyf.glyphs = {}
    for gname in order:
        pen = TTGlyphPen(glyph_set)
        glyph_set[gname].draw(Cu2QuPen(pen, 1.0, reverse_direction=True))
        glyf.glyphs[gname] = pen.glyph()
    font["loca"] = newTable("loca")
    font["glyf"] = glyf
    del font["CFF "]
    if "VORG" in font:
        del font["VORG"]
    glyf.compile(font)
    hmtx = font["hmtx"]
    for gname, glyph in glyf.glyphs.items():
        if hasattr(glyph, "xMin"):
            hmtx[gname] = (hmtx[gname][0], glyph.xMin)
    maxp = newTable("maxp")
    maxp.tableVersion = 0x00010000
    maxp.maxZones = 1
    for attr in ("maxTwilightPoints", "maxStorage", "maxFunctionDefs", "maxInstructionDefs",
                 "maxStackElements", "maxSizeOfInstructions", "maxComponentElements"):
        setattr(maxp, attr, 0)
    font["maxp"] = maxp
    post = font["post"]
    post.formatType = 2.0
    post.extraNames = []
    post.mapping = {}
    post.glyphOrder = order
    font["head"].indexToLocFormat = 0
    font["head"].glyphDataFormat = 0
    font.sfntVersion = "\x00\x01\x00\x00"
    font.save(str(out))


def _strings_in(obj) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in _strings_in(v)]
    if isinstance(obj, (list, tuple)):
        return [s for v in obj for s in _strings_in(v)]
    return []


# =============================================================================
# Generators
# =============================================================================


def make_markdown_and_text(out: Path) -> None:
    _write_text(out / "handbook/employee_handbook_en.md", EMPLOYEE_HANDBOOK_EN_MD)
    _write_text(out / "handbook/old_leave_policy_2019.md", OLD_LEAVE_POLICY_2019_MD)
    _write_text(out / "handbook/notes.txt", NOTES_TXT)
    _write_text(out / "finance/budget_memo_2026.md", BUDGET_MEMO_2026_MD)


def make_handbook_docx(out: Path) -> None:
    import docx
    from docx.shared import Pt

    doc = docx.Document()
    for kind, payload in HANDBOOK_ZH_DOCX:
        if kind == "title":
            doc.add_heading(payload, level=0)
        elif kind == "h1":
            doc.add_heading(payload, level=1)
        elif kind == "h2":
            doc.add_heading(payload, level=2)
        elif kind == "p":
            doc.add_paragraph(payload)
        elif kind == "table":
            header, rows = payload["header"], payload["rows"]
            table = doc.add_table(rows=1 + len(rows), cols=len(header))
            table.style = "Table Grid"
            for c, text in enumerate(header):
                cell = table.cell(0, c)
                cell.text = text
                for run in cell.paragraphs[0].runs:
                    run.bold = True
            for r, row in enumerate(rows, start=1):
                for c, text in enumerate(row):
                    table.cell(r, c).text = text
        else:
            raise ValueError(kind)
    # East Asian font for the default style so Word renders Chinese with a CJK face.
    normal = doc.styles["Normal"]
    normal.font.size = Pt(11)
    rpr = normal.element.get_or_add_rPr()
    rfonts = rpr.find(docx.oxml.ns.qn("w:rFonts"))
    if rfonts is None:
        rfonts = docx.oxml.OxmlElement("w:rFonts")
        rpr.append(rfonts)
    rfonts.set(docx.oxml.ns.qn("w:eastAsia"), "Noto Sans CJK SC")

    props = doc.core_properties
    props.title = SIDECARS["handbook/员工手册.docx"]["title"]
    props.author = "北风机器人人力资源部"
    props.last_modified_by = "北风机器人人力资源部"
    props.language = "zh-CN"
    props.revision = 1
    props.created = FIXED_DATETIME_NAIVE
    props.modified = FIXED_DATETIME_NAIVE
    props.last_printed = FIXED_DATETIME_NAIVE
    path = out / "handbook/员工手册.docx"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc.save(str(path))
    _normalize_ooxml(path)


def _new_pdf(title: str, author: str, lang: str, footer_font: str, footer_template: str):
    """A4 FPDF with fixed metadata; ``footer_template`` gets ``{page}`` and ``{pages}``."""
    from fpdf import FPDF

    class _PDF(FPDF):
        def footer(self) -> None:
            self.set_y(-15)
            self.set_font(footer_font, "", 8)
            self.cell(0, 5, footer_template.format(page=self.page_no(), pages=2), align="C")

    pdf = _PDF(format="A4", unit="mm")
    pdf.set_creation_date(FIXED_DATETIME)
    pdf.set_producer("Northwind sample corpus generator (fpdf2)")
    pdf.set_creator("scripts/make_sample_corpus.py")
    pdf.set_title(title)
    pdf.set_author(author)
    pdf.set_lang(lang)
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.set_margins(20, 18, 20)
    return pdf


def make_x2000_pdf(out: Path) -> None:
    c = X2000_PDF
    font = "Helvetica"
    pdf = _new_pdf(c["title"], COMPANY_EN, "en", font, COMPANY_EN + " - X-2000 datasheet - page {page} of {pages}")

    # Page 1: overview and specifications
    pdf.add_page()
    pdf.set_font(font, "B", 18)
    pdf.multi_cell(0, 9, c["title"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(font, "", 10)
    pdf.multi_cell(0, 6, c["subtitle"], new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    p1 = c["page1"]
    pdf.set_font(font, "B", 13)
    pdf.cell(0, 8, p1["overview_heading"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(font, "", 11)
    for para in p1["overview"]:
        pdf.multi_cell(0, 6, para, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(2)
    pdf.ln(2)
    pdf.set_font(font, "B", 13)
    pdf.cell(0, 8, p1["spec_heading"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(font, "", 10.5)
    with pdf.table(col_widths=(55, 115), text_align="LEFT", line_height=7,
                   first_row_as_headings=True) as table:
        table.row(["Parameter", "Value"])
        for key, value in p1["specs"]:
            table.row([key, value])

    # Page 2: error codes and maintenance
    pdf.add_page()
    p2 = c["page2"]
    pdf.set_font(font, "B", 13)
    pdf.cell(0, 8, p2["error_heading"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(font, "", 11)
    pdf.multi_cell(0, 6, p2["error_intro"], new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)
    pdf.set_font(font, "", 10)
    with pdf.table(col_widths=(18, 52, 100), text_align="LEFT", line_height=6,
                   first_row_as_headings=True) as table:
        table.row(["Code", "Meaning", "What to do"])
        for code, meaning, action in p2["errors"]:
            table.row([code, meaning, action])
    pdf.ln(5)
    pdf.set_font(font, "B", 13)
    pdf.cell(0, 8, p2["maint_heading"], new_x="LMARGIN", new_y="NEXT")
    pdf.set_font(font, "", 11)
    for item in p2["maintenance"]:
        pdf.multi_cell(0, 6, "- " + item, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.multi_cell(0, 6, p2["support"], new_x="LMARGIN", new_y="NEXT")

    path = out / "products/x2000_datasheet.pdf"
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))


def make_r500_pdf(out: Path) -> str:
    """Build the Chinese PDF. Returns a short description of the font used."""
    c = R500_PDF
    footer = COMPANY_ZH + " R-500 产品手册 第 {page} 页 / 共 {pages} 页"
    table_headers = ["参数", "规格", "代码", "含义", "处理方法"]
    needed = "".join(_strings_in(c)) + footer + "".join(table_headers) + "- " + string.printable

    reg_src, reg_idx = _find_cjk_font(bold=False)
    try:
        bold_src, bold_idx = _find_cjk_font(bold=True)
    except SystemExit:
        bold_src, bold_idx = reg_src, reg_idx

    with tempfile.TemporaryDirectory() as tmp:
        reg_ttf = Path(tmp) / "NotoSansCJKsc-Regular-subset.ttf"
        bold_ttf = Path(tmp) / "NotoSansCJKsc-Bold-subset.ttf"
        _cjk_truetype_subset(reg_src, reg_idx, needed, reg_ttf)
        _cjk_truetype_subset(bold_src, bold_idx, needed, bold_ttf)

        font = "NotoSansCJKsc"
        pdf = _new_pdf(c["title"], COMPANY_ZH, "zh-CN", font, footer)
        pdf.add_font(font, "", str(reg_ttf))
        pdf.add_font(font, "B", str(bold_ttf))

        # Page 1: introduction and specifications
        pdf.add_page()
        pdf.set_font(font, "B", 18)
        pdf.multi_cell(0, 10, c["title"], new_x="LMARGIN", new_y="NEXT", wrapmode="CHAR")
        pdf.set_font(font, "", 10)
        pdf.multi_cell(0, 6, c["subtitle"], new_x="LMARGIN", new_y="NEXT", wrapmode="CHAR")
        pdf.ln(4)
        p1 = c["page1"]
        pdf.set_font(font, "B", 13)
        pdf.cell(0, 8, p1["intro_heading"], new_x="LMARGIN", new_y="NEXT")
        pdf.set_font(font, "", 11)
        for para in p1["intro"]:
            pdf.multi_cell(0, 7, para, new_x="LMARGIN", new_y="NEXT", wrapmode="CHAR")
            pdf.ln(2)
        pdf.ln(2)
        pdf.set_font(font, "B", 13)
        pdf.cell(0, 8, p1["spec_heading"], new_x="LMARGIN", new_y="NEXT")
        pdf.set_font(font, "", 10.5)
        with pdf.table(col_widths=(50, 120), text_align="LEFT", line_height=7,
                       first_row_as_headings=True, wrapmode="CHAR") as table:
            table.row(table_headers[:2])
            for key, value in p1["specs"]:
                table.row([key, value])

        # Page 2: error codes and maintenance
        pdf.add_page()
        p2 = c["page2"]
        pdf.set_font(font, "B", 13)
        pdf.cell(0, 8, p2["error_heading"], new_x="LMARGIN", new_y="NEXT")
        pdf.set_font(font, "", 11)
        pdf.multi_cell(0, 7, p2["error_intro"], new_x="LMARGIN", new_y="NEXT", wrapmode="CHAR")
        pdf.ln(3)
        pdf.set_font(font, "", 10)
        with pdf.table(col_widths=(18, 52, 100), text_align="LEFT", line_height=6.5,
                       first_row_as_headings=True, wrapmode="CHAR") as table:
            table.row(table_headers[2:])
            for code, meaning, action in p2["errors"]:
                table.row([code, meaning, action])
        pdf.ln(5)
        pdf.set_font(font, "B", 13)
        pdf.cell(0, 8, p2["maint_heading"], new_x="LMARGIN", new_y="NEXT")
        pdf.set_font(font, "", 11)
        for item in p2["maintenance"]:
            pdf.multi_cell(0, 7, "- " + item, new_x="LMARGIN", new_y="NEXT", wrapmode="CHAR")
        pdf.ln(4)
        pdf.multi_cell(0, 7, p2["support"], new_x="LMARGIN", new_y="NEXT", wrapmode="CHAR")

        path = out / "products/产品手册_R500.pdf"
        path.parent.mkdir(parents=True, exist_ok=True)
        pdf.output(str(path))
    return f"Noto Sans CJK SC ({reg_src} #{reg_idx}, bold {bold_src} #{bold_idx}), subset and converted to TrueType"


def make_price_list_xlsx(out: Path) -> None:
    from openpyxl import Workbook
    from openpyxl.styles import Font

    wb = Workbook()
    wb.remove(wb.active)
    for sheet_name, content in PRICE_LIST_SHEETS.items():
        ws = wb.create_sheet(sheet_name)
        ws.append(content["header"])
        for cell in ws[1]:
            cell.font = Font(bold=True)
        for row in content["rows"]:
            ws.append(row)
        for col_idx, title in enumerate(content["header"], start=1):
            width = max(len(str(title)), *(len(str(r[col_idx - 1])) for r in content["rows"])) + 2
            ws.column_dimensions[ws.cell(1, col_idx).column_letter].width = min(width, 70)
        if "List Price (CNY)" in content["header"]:
            col = content["header"].index("List Price (CNY)") + 1
            for r in range(2, ws.max_row + 1):
                ws.cell(r, col).number_format = "#,##0"
        ws.freeze_panes = "A2"
    props = wb.properties
    props.creator = f"{COMPANY_EN} Sales Operations"
    props.lastModifiedBy = f"{COMPANY_EN} Sales Operations"
    props.title = "Northwind Robotics Price List 2026"
    props.created = FIXED_DATETIME_NAIVE
    props.modified = FIXED_DATETIME_NAIVE
    path = out / "products/price_list.xlsx"
    path.parent.mkdir(parents=True, exist_ok=True)
    wb.save(str(path))
    _normalize_ooxml(path)


def make_service_centers_csv(out: Path) -> None:
    path = out / "products/service_centers.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(SERVICE_CENTERS_HEADER)
        writer.writerows(SERVICE_CENTERS_ROWS)


def make_html(out: Path) -> None:
    _write_text(out / "it/runbook_vpn.html", VPN_RUNBOOK_HTML, encoding="utf-8")
    path = out / "it/运维手册.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(OPS_RUNBOOK_ZH_HTML.replace("\n", "\r\n").encode("gbk"))  # strict: fails on non-GBK chars


def _render_scan(lines, font_regular: tuple[str, int], font_bold: tuple[str, int], size: int,
                 line_height: int, width: int, angle: float, seed: int):
    """Render text lines like a scanned page: off-white paper, dark ink, slight skew, mild noise."""
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    regular = ImageFont.truetype(font_regular[0], size, index=font_regular[1])
    bold = ImageFont.truetype(font_bold[0], size, index=font_bold[1])
    margin = 130
    height = 2 * margin + line_height * len(lines)
    page = Image.new("L", (width, height), 255)
    draw = ImageDraw.Draw(page)
    y = margin
    for text, style in lines:
        if text:
            draw.text((margin, y), text, fill=0, font=bold if style == "bold" else regular)
        y += line_height
    # Skew like a page placed slightly crooked on the scanner glass.
    page = page.rotate(angle, resample=Image.BICUBIC, expand=False, fillcolor=255)
    page = page.filter(ImageFilter.GaussianBlur(radius=0.6))

    rng = np.random.default_rng(seed)
    ink = 1.0 - np.asarray(page, dtype=np.float32) / 255.0  # 1 where text is
    paper = 236.0
    # Gentle uneven illumination from left to right.
    paper_row = paper - 6.0 * np.linspace(0.0, 1.0, width, dtype=np.float32)
    img = paper_row[None, :] * (1.0 - ink) + 28.0 * ink
    # Quantize the tones so the PNG compresses well; a real scan would be noisier and much larger.
    img = np.round(img / 8.0) * 8.0
    # Mild grain on 1% of the pixels (dense grain would make the PNG several times larger).
    grainy = rng.random(img.shape) < 0.01
    img[grainy] += rng.choice(np.array([-16.0, -8.0, 8.0], dtype=np.float32), size=int(grainy.sum()))
    # Sparse dust specks.
    specks = rng.random(img.shape) < 0.0001
    img[specks] = rng.uniform(60, 160, size=int(specks.sum()))
    img = np.clip(img, 0, 255).astype(np.uint8)
    return Image.fromarray(img, mode="L")


def make_scans(out: Path) -> None:
    latin = (_find_latin_font(False), 0)
    latin_bold = (_find_latin_font(True), 0)
    cjk = _find_cjk_font(False)
    try:
        cjk_bold = _find_cjk_font(True)
    except SystemExit:
        cjk_bold = cjk

    (out / "scans").mkdir(parents=True, exist_ok=True)
    en = _render_scan(SCAN_EN_LINES, latin, latin_bold, size=40, line_height=64, width=1500,
                      angle=0.6, seed=RANDOM_SEED)
    en.save(out / "scans/expense_policy_scan.png", optimize=True, dpi=(300, 300))
    zh = _render_scan(SCAN_ZH_LINES, cjk, cjk_bold, size=52, line_height=84, width=1500,
                      angle=-0.5, seed=RANDOM_SEED + 1)
    zh.save(out / "scans/安全须知_扫描.png", optimize=True, dpi=(300, 300))


def make_sidecars(out: Path) -> None:
    for rel, meta in SIDECARS.items():
        if not (out / rel).is_file():
            raise SystemExit(f"sidecar for missing file: {rel}")
        _write_text(out / f"{rel}.meta.json", json.dumps(meta, ensure_ascii=False, indent=2) + "\n")


def make_facts(facts_path: Path) -> None:
    def esc(s: str) -> str:
        return s.replace("|", "\\|")

    lines = [
        "# FACTS: questions about the sample corpus",
        "",
        "Generated by `scripts/make_sample_corpus.py`. Do not edit by hand.",
        "",
        "This file describes the corpus in `data/sample/` and lives outside it so it is never indexed.",
        " All companies, people, numbers and addresses are made up.",
        "",
        "## Answerable questions",
        "",
        "| id | lang | question | expected answer | source file | location | also in |",
        "|----|------|----------|-----------------|-------------|----------|---------|",
    ]
    for fid, lang, q, a, src, loc in FACTS_ANSWERABLE:
        also = "; ".join(FACTS_ALSO_IN.get(fid, [])) or "-"
        lines.append(f"| {fid} | {lang} | {esc(q)} | {esc(a)} | {src} | {esc(loc)} | {esc(also)} |")
    lines += [
        "",
        "## Not answerable from the corpus",
        "",
        "The system should say it does not know or cite no source for these.",
        "",
        "| id | lang | question |",
        "|----|------|----------|",
    ]
    for fid, lang, q in FACTS_UNANSWERABLE:
        lines.append(f"| {fid} | {lang} | {esc(q)} |")
    lines += ["", "## Documents with special status", ""]
    for src, note in FACTS_SPECIAL:
        lines.append(f"- `{src}`: {note}")
    lines += [
        "",
        "## Notes",
        "",
        "- Files without a sidecar (`handbook/notes.txt`, `products/price_list.xlsx`, "
        "`products/service_centers.csv`, `scans/安全须知_扫描.png`) use the pipeline defaults.",
        "- `it/运维手册.html` is encoded in GBK and says so in `<meta charset=\"gbk\">`.",
        "- The two `scans/*.png` files have no text layer and must go through OCR "
        "(`eng` and `chi_sim`).",
        "- The English and Chinese handbooks agree on annual leave, sick leave and the 30-day claim "
        "deadline. Only the Chinese handbook has hotel limits by city tier and overtime pay.",
        "",
    ]
    _write_text(facts_path, "\n".join(lines))


def check_ocr(out: Path) -> dict[str, float]:
    """OCR both scans with tesseract and return the mean word confidence of each."""
    import pytesseract
    from PIL import Image

    results = {}
    for rel, lang in (("scans/expense_policy_scan.png", "eng"), ("scans/安全须知_扫描.png", "chi_sim")):
        with Image.open(out / rel) as img:
            data = pytesseract.image_to_data(img, lang=lang, output_type=pytesseract.Output.DICT)
        confs = [float(c) for c, t in zip(data["conf"], data["text"]) if float(c) >= 0 and t.strip()]
        mean = sum(confs) / len(confs) if confs else 0.0
        results[rel] = mean
        text = pytesseract.image_to_string(Image.open(out / rel), lang=lang)
        print(f"--- {rel} ({lang}): mean word confidence {mean:.1f} over {len(confs)} words")
        print(text.strip())
        if mean < OCR_MIN_CONFIDENCE[lang]:
            print(f"!!! below required {OCR_MIN_CONFIDENCE[lang]}", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: data/sample)")
    parser.add_argument("--facts", type=Path, default=DEFAULT_OUT.parent / "sample_facts.md",
                        help="where to write the question/answer list (outside the corpus; default: data/sample_facts.md)")
    parser.add_argument("--check-ocr", action="store_true", help="OCR the scans afterwards and print confidences")
    args = parser.parse_args(argv)
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)

    make_markdown_and_text(out)
    make_handbook_docx(out)
    make_x2000_pdf(out)
    font_info = make_r500_pdf(out)
    make_price_list_xlsx(out)
    make_service_centers_csv(out)
    make_html(out)
    make_scans(out)
    make_sidecars(out)
    make_facts(args.facts)

    total = 0
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        size = path.stat().st_size
        total += size
        print(f"{size:>9,d}  {path.relative_to(out)}")
    print(f"{total:>9,d}  total")
    print(f"Chinese PDF font: {font_info}")

    if args.check_ocr:
        results = check_ocr(out)
        bad = [k for k, v in results.items()
               if v < OCR_MIN_CONFIDENCE["chi_sim" if "安全" in k else "eng"]]
        if bad:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
